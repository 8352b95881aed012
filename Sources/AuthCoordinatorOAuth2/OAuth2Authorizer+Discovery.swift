import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// Authorization-server metadata discovery (RFC 8414; OpenID Connect Discovery 1.0): an
// authorizer made from an issuer reads its endpoints before its first token request.
extension OAuth2Authorizer {
  /// Creates an authorizer that reads its endpoints from the issuer's metadata (RFC 8414), so
  /// a service configures an issuer, not endpoints.
  ///
  /// Before its first token request the authorizer reads
  /// `<scheme>://<host>/.well-known/oauth-authorization-server<issuer path>` (RFC 8414 §3.1)
  /// and, when that answers 404, `<issuer>/.well-known/openid-configuration` (OpenID Connect
  /// Discovery 1.0 §4). It takes the `token_endpoint`, the `revocation_endpoint` (revocation on
  /// sign-out when there is one) and `token_endpoint_auth_methods_supported`, and keeps them
  /// for its life (its copies share them); only a failed read is read again, by the next
  /// request.
  ///
  /// ```swift
  /// let authorizer = OAuth2Authorizer(
  ///   issuer: URL(string: "https://auth.example.com")!,
  ///   clientID: "reports-service", clientSecret: secret, scope: "reports:read")
  /// let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
  /// ```
  ///
  /// A failed read fails that token request: transiently when the metadata did not arrive
  /// (a network failure, a timeout, 5xx, 429), so the coordinator's retries and back-off apply;
  /// terminally when the document cannot be used
  /// (``AuthCoordinatorError/Code-swift.struct/discoveryFailed``), names
  /// another issuer (``AuthCoordinatorError/Code-swift.struct/issuerMismatch``)
  /// or does not support the client's authentication
  /// (``AuthCoordinatorError/Code-swift.struct/unsupportedClientAuthentication``).
  /// The metadata request keeps the token request's limits: ``transport``, ``timeout``,
  /// ``maxBodySize``, no redirect (see ``allowsSameOriginHTTPSRedirects``).
  ///
  /// > Important: The issuer must be `https`, and so must the endpoints its metadata names;
  /// > `http` is accepted only for an issuer on a loopback address (a test server), and then for
  /// > its endpoints too. ``tokenEndpoint`` and ``revocationEndpoint`` of such an authorizer are
  /// > not used: read the discovered ones with ``metadata()``.
  ///
  /// - Parameters:
  ///   - issuer: The issuer identifier: an `https` URL without query or fragment, exactly as
  ///     the server's metadata names it.
  ///   - clientID: The client identifier.
  ///   - clientSecret: The client secret; `nil` for a public client.
  ///   - clientAuthentication: How the client authenticates; by default HTTP Basic with a
  ///     secret and `none` without. It must be one the metadata lists.
  ///   - scope: The scope to request, if any.
  ///   - parameters: Extra form parameters for every request.
  ///   - primaryGrant: The grant without a refresh token; client credentials by default.
  ///   - fallbackOnInvalidGrant: Whether a refused refresh runs the primary grant; by default
  ///     for every grant but the authorization code grant.
  ///   - userIDField: The reply field that holds the user id; `user_id` by default.
  ///   - timeout: How long one client-credentials, authorization-code or metadata request may
  ///     take; 5 seconds by default.
  ///   - refreshTimeout: How long one refresh-token request may take; 30 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - allowsSameOriginHTTPSRedirects: Whether a same-origin HTTPS redirect is followed;
  ///     `false` by default.
  ///   - session: The session to use; `URLSession.shared` by default.
  ///   - transport: Where the requests go; by default a ``URLSessionTransport`` on `session`.
  ///   - now: The wall-clock source for `expiresAt`; `Date()` by default.
  public init(
    issuer: URL,
    clientID: String,
    clientSecret: String? = nil,
    clientAuthentication: ClientAuthentication? = nil,
    scope: String? = nil,
    parameters: [String: String] = [:],
    primaryGrant: Grant = .clientCredentials,
    fallbackOnInvalidGrant: Bool? = nil,
    userIDField: String = "user_id",
    timeout: Duration = .seconds(5),
    refreshTimeout: Duration = .seconds(30),
    maxBodySize: Int = 1 << 20,
    allowsSameOriginHTTPSRedirects: Bool = false,
    session: URLSession = .shared,
    transport: (any HTTPTransport)? = nil,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.init(
      tokenEndpoint: issuer, clientID: clientID, clientSecret: clientSecret,
      clientAuthentication: clientAuthentication, scope: scope, parameters: parameters,
      primaryGrant: primaryGrant, fallbackOnInvalidGrant: fallbackOnInvalidGrant,
      userIDField: userIDField, timeout: timeout, refreshTimeout: refreshTimeout,
      maxBodySize: maxBodySize, allowsSameOriginHTTPSRedirects: allowsSameOriginHTTPSRedirects,
      session: session, transport: transport, now: now)
    self.discovery = MetadataCache(issuer: issuer)
  }

  /// Creates an authorizer that reads its endpoints from the issuer's metadata, whose client
  /// authentication carries the client id (``ClientAuthentication/privateKeyJWT(clientID:assertion:)``,
  /// ``ClientAuthentication/clientSecretBasic(id:secret:)``...). See
  /// ``init(issuer:clientID:clientSecret:clientAuthentication:scope:parameters:primaryGrant:fallbackOnInvalidGrant:userIDField:timeout:refreshTimeout:maxBodySize:allowsSameOriginHTTPSRedirects:session:transport:now:)``.
  ///
  /// - Parameters:
  ///   - issuer: The issuer identifier.
  ///   - clientAuthentication: How the client authenticates, with its client id; it must be
  ///     one the metadata lists.
  ///   - scope: The scope to request, if any.
  ///   - parameters: Extra form parameters for every request.
  ///   - primaryGrant: The grant without a refresh token; client credentials by default.
  ///   - fallbackOnInvalidGrant: Whether a refused refresh runs the primary grant; by default
  ///     for every grant but the authorization code grant.
  ///   - userIDField: The reply field that holds the user id; `user_id` by default.
  ///   - timeout: How long one client-credentials, authorization-code or metadata request may
  ///     take; 5 seconds by default.
  ///   - refreshTimeout: How long one refresh-token request may take; 30 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - allowsSameOriginHTTPSRedirects: Whether a same-origin HTTPS redirect is followed;
  ///     `false` by default.
  ///   - session: The session to use; `URLSession.shared` by default.
  ///   - transport: Where the requests go; by default a ``URLSessionTransport`` on `session`.
  ///   - now: The wall-clock source for `expiresAt` and an assertion's time; `Date()` by
  ///     default.
  public init(
    issuer: URL,
    clientAuthentication: ClientAuthentication,
    scope: String? = nil,
    parameters: [String: String] = [:],
    primaryGrant: Grant = .clientCredentials,
    fallbackOnInvalidGrant: Bool? = nil,
    userIDField: String = "user_id",
    timeout: Duration = .seconds(5),
    refreshTimeout: Duration = .seconds(30),
    maxBodySize: Int = 1 << 20,
    allowsSameOriginHTTPSRedirects: Bool = false,
    session: URLSession = .shared,
    transport: (any HTTPTransport)? = nil,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.init(
      issuer: issuer, clientID: clientAuthentication.clientID ?? "",
      clientSecret: clientAuthentication.secret, clientAuthentication: clientAuthentication,
      scope: scope, parameters: parameters, primaryGrant: primaryGrant,
      fallbackOnInvalidGrant: fallbackOnInvalidGrant, userIDField: userIDField,
      timeout: timeout, refreshTimeout: refreshTimeout, maxBodySize: maxBodySize,
      allowsSameOriginHTTPSRedirects: allowsSameOriginHTTPSRedirects, session: session,
      transport: transport, now: now)
  }

  /// The issuer whose metadata gives the endpoints, or `nil` for an authorizer made from its
  /// endpoints.
  public var issuer: URL? { discovery?.issuer }

  /// The issuer's metadata: read on the first call (or the first token request), then kept;
  /// `nil` for an authorizer made from its endpoints.
  ///
  /// Call it at startup to fail fast on a wrong issuer; the token requests read it anyway.
  /// Concurrent callers share one read; a failed read is not kept, and the next call reads
  /// again.
  ///
  /// - Returns: The metadata, or `nil` when the authorizer has no ``issuer``.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError``:
  ///   ``AuthCoordinatorError/Code-swift.struct/discoveryFailed`` (transient
  ///   when the metadata did not arrive),
  ///   ``AuthCoordinatorError/Code-swift.struct/issuerMismatch``;
  ///   `CancellationError`.
  public func metadata() async throws -> ServerMetadata? {
    guard let discovery else { return nil }
    let reader = self
    return try await discovery.metadata { try await reader.fetchMetadata(discovery.issuer) }
  }

  /// This authorizer with the discovered endpoints and no discovery, after checking that the
  /// metadata supports the client's authentication; `self` when it was made from endpoints.
  func discovered() async throws -> OAuth2Authorizer {
    guard let metadata = try await metadata() else { return self }
    if let names = clientAuthentication.metadataNames,
      !names.contains(where: metadata.tokenEndpointAuthMethodsSupported.contains)
    {
      let listed = metadata.tokenEndpointAuthMethodsSupported.map {
        Sanitizer.clean($0, maxLength: 40)
      }
      throw AuthCoordinatorError(
        .unsupportedClientAuthentication,
        "the issuer's token endpoint supports the client authentication methods "
          + "[\(listed.joined(separator: ", "))], and this client uses "
          + "\(names.joined(separator: " or ")): nothing was sent", transient: false)
    }
    var resolved = self
    resolved.discovery = nil
    resolved.tokenEndpoint = metadata.tokenEndpoint
    resolved.revocationEndpoint = metadata.revocationEndpoint
    return resolved
  }

  /// The RFC 8414 location, then the OpenID Connect one, of `issuer`'s metadata.
  static func metadataLocations(of issuer: URL) -> [URL]? {
    guard var components = URLComponents(url: issuer, resolvingAgainstBaseURL: false),
      components.query == nil, components.fragment == nil, components.host != nil
    else { return nil }
    var path = components.percentEncodedPath
    while path.hasSuffix("/") { path.removeLast() }
    components.percentEncodedPath = "/.well-known/oauth-authorization-server" + path
    let rfc8414 = components.url
    components.percentEncodedPath = path + "/.well-known/openid-configuration"
    let openID = components.url
    guard let rfc8414, let openID else { return nil }
    return [rfc8414, openID]
  }

  /// Reads `issuer`'s metadata: the RFC 8414 location, the OpenID Connect one after a 404.
  func fetchMetadata(_ issuer: URL) async throws -> ServerMetadata {
    let scheme = issuer.scheme?.lowercased()
    guard scheme == "https" || ServerMetadata.isLoopbackHTTP(issuer),
      let locations = Self.metadataLocations(of: issuer)
    else {
      throw ServerMetadata.invalid(
        "the issuer \(URLRedaction.redacted(issuer)) is not an https URL without query or "
          + "fragment (http is allowed only on a loopback address)")
    }
    for (index, location) in locations.enumerated() {
      let (status, body) = try await getMetadata(location)
      if status == 404, index + 1 < locations.count { continue }
      guard status == 200 else {
        throw AuthCoordinatorError(
          .discoveryFailed,
          "the issuer's metadata (\(location.path)) answered HTTP \(status)",
          transient: Self.isTransientStatus(status))
      }
      return try ServerMetadata(document: body, issuer: issuer)
    }
    preconditionFailure("Internal inconsistency: no metadata location was read")
  }

  /// One `GET` of a metadata document, under the token request's limits.
  private func getMetadata(_ location: URL) async throws -> (status: Int, body: Data) {
    var request = URLRequest(
      url: location, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout.seconds)
    request.httpMethod = "GET"
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    let redirects = RedirectPolicy(
      endpoint: location, allowsSameOriginHTTPS: allowsSameOriginHTTPSRedirects)
    let outcome: HTTPTransportOutcome
    do {
      try Task.checkCancellation()
      outcome = try await transport.send(
        HTTPTransportRequest(
          request, maxBodySize: maxBodySize, timeout: timeout,
          redirect: { _, next in redirects.allowsRedirect(to: next.url) ? next : nil }))
    } catch let error as URLError {
      // The error itself is dropped: it carries the request URL.
      throw AuthCoordinatorError(
        .discoveryFailed,
        error.code == .timedOut
          ? "the issuer's metadata request timed out after \(timeout)"
          : "the issuer's metadata request did not get through (URLError "
            + "\(error.code.rawValue))", underlying: URLError(error.code), transient: true)
    }
    switch outcome {
    case .redirectRefused(let status):
      throw ServerMetadata.invalid(
        "the issuer's metadata (\(location.path)) answered HTTP \(status), a redirect; it was "
          + "not followed")
    case .truncated(let response, _):
      let status = (response as? HTTPURLResponse)?.statusCode ?? 0
      throw AuthCoordinatorError(
        .discoveryFailed,
        "the issuer's metadata (HTTP \(status)) is larger than \(maxBodySize) bytes",
        transient: Self.isTransientStatus(status))
    case .complete(let response, let body):
      guard let http = response as? HTTPURLResponse else {
        throw ServerMetadata.invalid("the issuer's metadata reply is not HTTP")
      }
      return (http.statusCode, body)
    }
  }
}
