import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An ``/AuthCoordinator/Authorizer`` that obtains tokens from an OAuth 2 token endpoint
/// (RFC 6749) over `URLSession` (or any ``HTTPTransport``): for a Swift service that calls APIs
/// on its own behalf or for a user.
///
/// Each authorization is one token request:
/// - when the model being replaced (``/AuthCoordinator/AuthorizationRequest/replacing``) holds
///   a refresh token, a refresh token grant (RFC 6749 §6). A server that rotates refresh tokens
///   answers a new one, which the new model holds; a reply without one keeps the old one. On
///   `invalid_grant` (the token was revoked or already used) the authorizer runs the
///   ``primaryGrant`` instead when ``fallbackOnInvalidGrant`` says so (after the coordinator's
///   lease guard passed again: ``/AuthCoordinator/AuthorizationRequest/confirmAnotherTokenRequest()``),
///   and never sends that refresh token again;
/// - otherwise the ``primaryGrant``: client credentials (RFC 6749 §4.4), an authorization
///   code (§4.1, with an optional PKCE verifier), a token exchange (RFC 8693) or a JWT bearer
///   assertion (RFC 7523 §2.1).
///
/// ```swift
/// let authorizer = OAuth2Authorizer(
///   tokenEndpoint: URL(string: "https://auth.example.com/oauth/token")!,
///   clientID: "reports-service", clientSecret: secret, scope: "reports:read")
/// let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
/// let model = try await coordinator.authModel(for: AccountKey(account: "reports-service"))
/// ```
///
/// The request enforces the same limits as the Alipay bridge's `HTTPTokenExchanger`: at most
/// ``maxBodySize`` reply bytes are read, the whole request is bounded by ``timeout`` (a
/// refresh-token request by the longer ``refreshTimeout``, so a server that rotated and is slow
/// to say so is waited for, and still well within the coordinator's maximum hold), a token
/// request goes on a connection of its own (never a reused keep-alive one), and no
/// redirect is followed (see ``allowsSameOriginHTTPSRedirects``). A token request is never
/// retried: the caller decides, with ``/AuthCoordinator/AuthCoordinatorError/isTransient``.
///
/// Errors are ``/AuthCoordinator/AuthCoordinatorError``s: RFC 6749 §5.2's codes
/// (``AuthCoordinatorError/Code-swift.struct/invalidGrant`` and the others,
/// terminal), ``AuthCoordinatorError/Code-swift.struct/tokenEndpointError``
/// for every other failure of the endpoint (transient for 5xx, 429, `temporarily_unavailable`
/// and `server_error`), and ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/networkError``
/// when the request did not get through or ran out of time (transient). A cancelled Task throws
/// `CancellationError`.
///
/// > Important: No error, message, description or reflection contains an access token, a
/// > refresh token, the client secret, an authorization code, a code verifier, a token
/// > exchange's subject or actor token or a JWT bearer assertion. The server's
/// > `error_description` appears in messages only cut short, reduced to printable ASCII and
/// > with token-like values replaced by `<redacted>`.
public struct OAuth2Authorizer: Authorizer {
  /// The token endpoint (RFC 6749 §3.2).
  public var tokenEndpoint: URL
  /// The revocation endpoint (RFC 7009), or `nil` (the default) to revoke nothing. With one, a
  /// coordinator revokes a signed-out account's refresh token there (``revoke(_:)``), after
  /// the sign-out took effect, once, in the background.
  public var revocationEndpoint: URL?
  /// The client identifier (RFC 6749 §2.2).
  public var clientID: String
  /// The client secret, or `nil` for a public client. Never printed.
  public var clientSecret: String?
  /// How the client authenticates: a secret in HTTP Basic or in the form, none, or a client
  /// assertion (``ClientAuthentication``). Default ``ClientAuthentication/basic`` when there is
  /// a secret, ``ClientAuthentication/none`` without one. An authentication that carries its own
  /// client id and secret (``ClientAuthentication/clientSecretBasic(id:secret:)``...) sends
  /// those instead of ``clientID`` and ``clientSecret``.
  public var clientAuthentication: ClientAuthentication
  /// The `scope` sent with the client credentials, token exchange and JWT bearer grants, or
  /// `nil` for none. A refresh sends
  /// none: it is granted the scope of the grant it continues (RFC 6749 §6), which the server
  /// may have narrowed (the reply's `scope`, in `extraInfo["scope"]`).
  public var scope: String?
  /// Extra form parameters sent with every token request (an `audience`, a `resource`...).
  /// The grant's own parameters win over an entry of the same name.
  public var parameters: [String: String]
  /// What each authorization mode's token is asked for: a key whose
  /// ``/AuthCoordinator/AccountKey/mode`` is in the table gets a token for that
  /// ``TokenRequest`` (its scope, audience, resources and parameters), cached, coalesced,
  /// refreshed and revoked under its own key by the coordinator. Default empty.
  ///
  /// A mode not in the table (``/AuthCoordinator/AuthMode/platformOnly``, the default of
  /// `AccountKey(account:)`, among them) is asked for with the authorizer's own ``scope`` and
  /// ``parameters``, as without a table, and its reply's scope is recorded, not checked.
  ///
  /// ```swift
  /// authorizer.requests = [
  ///   "reports": .init(scope: "reports:read", resources: [reportsAPI]),
  ///   "billing": .init(scope: "invoices:write", audience: "https://billing.example.com"),
  /// ]
  /// let billing = try await coordinator.authModel(for: AccountKey(account: "svc", mode: "billing"))
  /// ```
  public var requests: [AuthMode: TokenRequest] = [:]
  /// The table entry this copy asks for (set by ``keyed(for:)``), or `nil`.
  var keyedRequest: TokenRequest?
  /// The grant that runs without a refresh token. Default ``Grant/clientCredentials``.
  public var primaryGrant: Grant
  /// Whether an `invalid_grant` answer to a refresh runs the ``primaryGrant`` instead of
  /// failing. Default: `true` for the non-interactive primary grants (client credentials, token
  /// exchange, JWT bearer), `false` for the authorization code grant.
  public var fallbackOnInvalidGrant: Bool
  /// The reply field whose value becomes the model's ``/AuthCoordinator/AuthModel/uid`` (a string,
  /// or a number written as text); the uid is empty when the reply has no such field. Default
  /// `user_id`.
  public var userIDField: String
  /// How long one client-credentials or authorization-code request may take, from its start to
  /// the last byte of the reply. Default 5 seconds. When it passes the request is cancelled and
  /// the authorizer throws ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/networkError``.
  /// It does not apply to a refresh-token grant, which ``refreshTimeout`` bounds.
  public var timeout: Duration
  /// How long one refresh-token request may take, from its start to the last byte of the reply.
  /// Default 30 seconds. When it passes the request is cancelled and the authorizer throws
  /// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/networkError`` (transient: the
  /// silent-refresh policy retries it).
  ///
  /// It is longer than ``timeout`` because a server may rotate the refresh token and then be
  /// slow to answer: a refresh cut short then has lost the new token, and the next refresh
  /// sends the spent one. But it must end well within the coordinator's
  /// ``/AuthCoordinator/AuthCoordinator/Configuration/maximumHold`` (320 seconds by default for a
  /// silent authorizer), which abandons a refresh still running and discards its result: the
  /// hold must exceed every attempt of the silent-refresh policy
  /// (``/AuthCoordinator/SilentRefreshPolicy/maxAttempts``, each up to
  /// ``longestAuthorization``) plus the waits between them
  /// (``/AuthCoordinator/SilentRefreshPolicy/maxRetryWait``). With the defaults that is
  /// 3 × 35 s + 2 × 5 s = 115 s. Raise the hold with it if you raise this.
  public var refreshTimeout: Duration
  /// The most reply bytes read; a longer reply fails with
  /// ``AuthCoordinatorError/Code-swift.struct/tokenEndpointError``. Default
  /// 1 MiB.
  public var maxBodySize: Int
  /// Whether a redirect to the endpoint's own origin (same host and port, `https` on both
  /// sides) may be followed. Default `false`: a token endpoint does not redirect, every
  /// redirect fails with ``AuthCoordinatorError/Code-swift.struct/tokenEndpointError``
  /// and nothing is sent to its `Location`.
  public var allowsSameOriginHTTPSRedirects: Bool
  /// Where the token requests go. Default a ``URLSessionTransport`` on ``session``; give
  /// another (an in-process server, your HTTP stack) with `init(transport:…)`.
  public var transport: any HTTPTransport
  /// The session of the default transport: setting it replaces ``transport`` with a
  /// ``URLSessionTransport`` on the new session. `URLSession.shared` unless set, or when
  /// another transport is in use.
  public var session: URLSession {
    get { (transport as? URLSessionTransport)?.session ?? .shared }
    set { transport = URLSessionTransport(session: newValue) }
  }
  /// The wall clock `expires_in` counts from (read when the request is sent). Default `Date()`.
  public var now: @Sendable () -> Date
  /// The silent-refresh policy a coordinator uses with this authorizer unless its
  /// configuration sets one (``/AuthCoordinator/AuthCoordinator/Configuration/silentRefresh``).
  /// Default ``/AuthCoordinator/SilentRefreshPolicy/recommended``: refresh ahead of expiry in a
  /// lifetime-scaled window, retries of 5xx, 429 and network failures with back-off and
  /// `Retry-After`, a short memory of terminal failures. A refresh ahead never runs the
  /// authorization code grant's closure (the request allows no interaction).
  public var silentRefresh: SilentRefreshPolicy? = .recommended
  /// The issuer's metadata, for an authorizer made from an issuer (``issuer``); shared by
  /// copies.
  var discovery: MetadataCache?

  /// Creates an authorizer.
  ///
  /// - Parameters:
  ///   - tokenEndpoint: The token endpoint.
  ///   - revocationEndpoint: The revocation endpoint (RFC 7009); `nil` by default: nothing is
  ///     revoked on a sign-out.
  ///   - clientID: The client identifier.
  ///   - clientSecret: The client secret; `nil` for a public client.
  ///   - clientAuthentication: How the client authenticates; by default HTTP Basic with a
  ///     secret and `none` without.
  ///   - scope: The scope to request, if any.
  ///   - parameters: Extra form parameters for every request.
  ///   - primaryGrant: The grant without a refresh token; client credentials by default.
  ///   - fallbackOnInvalidGrant: Whether a refused refresh runs the primary grant; by default
  ///     for every grant but the authorization code grant.
  ///   - userIDField: The reply field that holds the user id; `user_id` by default.
  ///   - timeout: How long one client-credentials or authorization-code request may take;
  ///     5 seconds by default.
  ///   - refreshTimeout: How long one refresh-token request may take; 30 seconds by default,
  ///     well within the coordinator's default maximum hold (see ``refreshTimeout``).
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - allowsSameOriginHTTPSRedirects: Whether a same-origin HTTPS redirect is followed;
  ///     `false` by default.
  ///   - session: The session to use; `URLSession.shared` by default. Not used when
  ///     `transport` is given.
  ///   - transport: Where the requests go; by default a ``URLSessionTransport`` on `session`.
  ///   - now: The wall-clock source for `expiresAt`; `Date()` by default.
  public init(
    tokenEndpoint: URL,
    revocationEndpoint: URL? = nil,
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
    self.tokenEndpoint = tokenEndpoint
    self.revocationEndpoint = revocationEndpoint
    self.clientID = clientID
    self.clientSecret = clientSecret
    self.clientAuthentication = clientAuthentication ?? (clientSecret == nil ? .none : .basic)
    self.scope = scope
    self.parameters = parameters
    self.primaryGrant = primaryGrant
    self.fallbackOnInvalidGrant = fallbackOnInvalidGrant ?? !primaryGrant.isInteractive
    self.userIDField = userIDField
    self.timeout = timeout
    self.refreshTimeout = refreshTimeout
    self.maxBodySize = maxBodySize
    self.allowsSameOriginHTTPSRedirects = allowsSameOriginHTTPSRedirects
    self.transport = transport ?? URLSessionTransport(session: session)
    self.now = now
  }

  /// Creates an authorizer whose client authentication carries the client id: a secret
  /// (``ClientAuthentication/clientSecretBasic(id:secret:)``,
  /// ``ClientAuthentication/clientSecretPost(id:secret:)``), a public client
  /// (``ClientAuthentication/none(clientID:)``) or a client assertion
  /// (``ClientAuthentication/privateKeyJWT(clientID:assertion:)``).
  ///
  /// ```swift
  /// let authorizer = OAuth2Authorizer(
  ///   tokenEndpoint: URL(string: "https://auth.example.com/oauth/token")!,
  ///   clientAuthentication: .privateKeyJWT(clientID: "reports-service") { request in
  ///     try await kms.signJWT(audience: request.audience, jti: request.jti)
  ///   },
  ///   scope: "reports:read")
  /// ```
  ///
  /// - Parameters:
  ///   - tokenEndpoint: The token endpoint.
  ///   - revocationEndpoint: The revocation endpoint (RFC 7009); `nil` by default.
  ///   - clientAuthentication: How the client authenticates, with its client id. One of
  ///     ``ClientAuthentication/basic``, ``ClientAuthentication/post`` or
  ///     ``ClientAuthentication/none`` here leaves the client id empty: use the initializer
  ///     with `clientID:` for those.
  ///   - scope: The scope to request, if any.
  ///   - parameters: Extra form parameters for every request.
  ///   - primaryGrant: The grant without a refresh token; client credentials by default.
  ///   - fallbackOnInvalidGrant: Whether a refused refresh runs the primary grant; by default
  ///     for every grant but the authorization code grant.
  ///   - userIDField: The reply field that holds the user id; `user_id` by default.
  ///   - timeout: How long one client-credentials or authorization-code request may take;
  ///     5 seconds by default.
  ///   - refreshTimeout: How long one refresh-token request may take; 30 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - allowsSameOriginHTTPSRedirects: Whether a same-origin HTTPS redirect is followed;
  ///     `false` by default.
  ///   - session: The session to use; `URLSession.shared` by default.
  ///   - transport: Where the requests go; by default a ``URLSessionTransport`` on `session`.
  ///   - now: The wall-clock source for `expiresAt` and an assertion's time; `Date()` by
  ///     default.
  public init(
    tokenEndpoint: URL,
    revocationEndpoint: URL? = nil,
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
      tokenEndpoint: tokenEndpoint, revocationEndpoint: revocationEndpoint,
      clientID: clientAuthentication.clientID ?? "",
      clientSecret: clientAuthentication.secret, clientAuthentication: clientAuthentication,
      scope: scope, parameters: parameters, primaryGrant: primaryGrant,
      fallbackOnInvalidGrant: fallbackOnInvalidGrant, userIDField: userIDField,
      timeout: timeout, refreshTimeout: refreshTimeout, maxBodySize: maxBodySize,
      allowsSameOriginHTTPSRedirects: allowsSameOriginHTTPSRedirects, session: session,
      transport: transport, now: now)
  }

  /// Whether an authorization may involve the user: `true` only for the
  /// ``Grant/authorizationCode(_:)`` primary grant, whose closure may send the user to a consent
  /// page. With the other grants the authorizer is silent (`false`): the coordinator bounds it
  /// by its ``/AuthCoordinator/AuthCoordinator/Configuration/authorizationTimeout`` alone, and
  /// its refresh-loop guard delays a burst of forced refreshes (``/AuthCoordinator/AuthCoordinator/Configuration/loopBackoff``)
  /// instead of failing the callers. See ``/AuthCoordinator/Authorizer/isInteractive``.
  public var isInteractive: Bool { primaryGrant.isInteractive }

  /// Obtains a model: a refresh token grant when the replaced model holds a refresh token,
  /// otherwise the ``primaryGrant``.
  ///
  /// The request runs under the coordinator's authorization deadline (it is not an
  /// exchange of something the user brought back, so it does not call
  /// ``/AuthCoordinator/AuthorizationRequest/exchange(_:)``).
  ///
  /// - Parameter request: The authorization; its key's account becomes the model's ``/AuthCoordinator/AuthModel/account``.
  /// - Returns: The model: the access token, the refresh token (the new one, or the old one
  ///   when the reply has none), `expiresAt` = ``now`` at the request + `expires_in` (or an
  ///   `expires_at` on the server's clock, corrected), `uid` from
  ///   ``userIDField``, and `scope` and `token_type` in `extraInfo` when the reply has them.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` (see the type's discussion for the
  ///   codes); `CancellationError` when the Task is cancelled.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    if discovery != nil { return try await discovered().authorize(request) }
    if !requests.isEmpty { return try await keyed(for: request.key.mode).authorize(request) }
    guard let refreshToken = request.replacing?.refreshToken, !refreshToken.isEmpty else {
      return try await runPrimaryGrant(for: request)
    }
    do {
      return try await send(.refresh(refreshToken), for: request)
    } catch var error as AuthCoordinatorError where error.code == .invalidGrant {
      // The refresh token is dead (revoked, expired or already spent): the coordinator is
      // told, and never hands it to an authorizer again, whatever happens next.
      guard fallbackOnInvalidGrant else {
        error.refusesRefreshToken = true
        throw error
      }
      // Start a new family: a second token request, which the coordinator's guard must pass
      // as the first did (the grant may have lapsed while the refresh was on its way).
      do {
        try await request.confirmAnotherTokenRequest()
        return try await runPrimaryGrant(for: request)
      } catch var fallback as AuthCoordinatorError {
        fallback.refusesRefreshToken = true
        throw fallback
      }
    }
  }

  private func runPrimaryGrant(for request: AuthorizationRequest) async throws -> AuthModel {
    switch primaryGrant {
    case .clientCredentials:
      return try await send(.clientCredentials, for: request)
    case .authorizationCode(let obtain):
      guard request.allowsInteraction else {
        throw AuthCoordinatorError(
          .interactionRequired,
          "the authorization code grant needs the user, and this request may not involve them")
      }
      let code = try await obtain(request)
      return try await send(.authorizationCode(code), for: request)
    case .tokenExchange(let subject, let actor, let requestedTokenType):
      let exchange = try await tokenExchange(
        for: request, subject: subject, actor: actor, requestedTokenType: requestedTokenType)
      return try await send(.tokenExchange(exchange), for: request)
    case .jwtBearer(let assertion):
      let value = try await jwtBearerAssertion(for: request, make: assertion)
      return try await send(.jwtBearer(value), for: request)
    }
  }

  /// The longest one ``authorize(_:)`` spends in token requests: ``refreshTimeout`` plus
  /// ``timeout`` when ``fallbackOnInvalidGrant`` (a refresh refused with `invalid_grant`, then
  /// the primary grant), the longer of the two otherwise; for an authorizer made from an
  /// ``issuer``, plus two ``timeout``s for the metadata (its two locations). The time the
  /// ``Grant/authorizationCode(_:)`` closure takes to obtain a code is not included.
  ///
  /// A coordinator's ``/AuthCoordinator/AuthCoordinator/Configuration/maximumHold`` must exceed
  /// this times the silent-refresh policy's ``/AuthCoordinator/SilentRefreshPolicy/maxAttempts``,
  /// plus ``/AuthCoordinator/SilentRefreshPolicy/maxRetryWait`` for each retry, or it may
  /// abandon a refresh the server answered.
  public var longestAuthorization: Duration {
    let metadata = discovery == nil ? Duration.zero : timeout * 2
    return metadata
      + (fallbackOnInvalidGrant ? refreshTimeout + timeout : max(refreshTimeout, timeout))
  }

  /// ``longestAuthorization``: the coordinator holds the lease, and waits for a stopped
  /// refresh, at least this long for every attempt of its silent-refresh policy, so the
  /// default configuration and the articles' short deadlines never abandon a refresh the server
  /// may have answered (``/AuthCoordinator/Authorizer/longestRefresh``).
  public var longestRefresh: Duration? { longestAuthorization }

  /// The bound of one request: ``refreshTimeout`` for a refresh-token grant (a request the
  /// server may act on by rotating the token must not be abandoned by the authorizer),
  /// ``timeout`` otherwise.
  func timeout(for form: TokenForm) -> Duration {
    if case .refresh = form { return refreshTimeout }
    return timeout
  }

  /// Sends one token request and turns its reply into a model.
  func send(_ form: TokenForm, for request: AuthorizationRequest) async throws -> AuthModel {
    let (urlRequest, secrets) = try await makeRequest(form)
    try Task.checkCancellation()
    // A relative `expires_in` counts from here: the server's lifetime began no earlier.
    let sentAt = now()
    let redirects = RedirectPolicy(
      endpoint: tokenEndpoint, allowsSameOriginHTTPS: allowsSameOriginHTTPSRedirects)
    let outcome: BoundedDataTask.Outcome
    do {
      switch try await transport.send(
        HTTPTransportRequest(
          urlRequest, maxBodySize: maxBodySize, timeout: timeout(for: form),
          requiresFreshConnection: true,
          redirect: { _, next in redirects.allowsRedirect(to: next.url) ? next : nil }))
      {
      case .complete(let response, let body): outcome = .complete(response, body)
      case .truncated(let response, let body): outcome = .tooLarge(response, body)
      case .redirectRefused(let status): outcome = .redirectRefused(status)
      }
    } catch let error as URLError {
      // The error itself is dropped: it carries the request URL.
      outcome = .failed(error.code)
    }
    return try model(
      from: outcome, form: form, key: request.key, secrets: secrets,
      clock: ReplyClock(sentAt: sentAt, request: request))
  }
}
