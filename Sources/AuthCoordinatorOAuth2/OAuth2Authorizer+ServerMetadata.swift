import AuthCoordinator
import Foundation
import HTTPSupport

extension OAuth2Authorizer {
  /// What an authorizer made from an issuer uses of the authorization server's metadata
  /// (RFC 8414 §2; OpenID Connect Discovery 1.0 §3 has the same fields).
  ///
  /// ```swift
  /// let authorizer = OAuth2Authorizer(
  ///   issuer: URL(string: "https://auth.example.com")!, clientID: "svc", clientSecret: secret)
  /// let metadata = try await authorizer.metadata()  // optional: fails fast at startup
  /// print(metadata.tokenEndpoint)  // https://auth.example.com/oauth/token
  /// ```
  public struct ServerMetadata: Sendable, Hashable {
    /// The issuer, exactly the configured one (a document naming another is refused).
    public var issuer: URL
    /// `token_endpoint`: where the token requests go.
    public var tokenEndpoint: URL
    /// `revocation_endpoint` (RFC 7009), or `nil` when the document names none: then nothing
    /// is revoked on a sign-out.
    public var revocationEndpoint: URL?
    /// `token_endpoint_auth_methods_supported`; `["client_secret_basic"]` when the document
    /// omits it (RFC 8414 §2's default).
    public var tokenEndpointAuthMethodsSupported: [String]

    /// Creates metadata (the authorizer reads it from the issuer; a test may make its own).
    ///
    /// - Parameters:
    ///   - issuer: The issuer.
    ///   - tokenEndpoint: The token endpoint.
    ///   - revocationEndpoint: The revocation endpoint, if any.
    ///   - tokenEndpointAuthMethodsSupported: The client authentication methods the token
    ///     endpoint supports.
    public init(
      issuer: URL, tokenEndpoint: URL, revocationEndpoint: URL? = nil,
      tokenEndpointAuthMethodsSupported: [String] = ["client_secret_basic"]
    ) {
      self.issuer = issuer
      self.tokenEndpoint = tokenEndpoint
      self.revocationEndpoint = revocationEndpoint
      self.tokenEndpointAuthMethodsSupported = tokenEndpointAuthMethodsSupported
    }

    /// Reads a metadata document for `issuer`, checking its issuer (RFC 8414 §3.3) and its
    /// endpoints' schemes.
    ///
    /// - Throws: ``AuthCoordinatorError/Code-swift.struct/issuerMismatch`` or
    ///   ``AuthCoordinatorError/Code-swift.struct/discoveryFailed``, terminal.
    init(document body: Data, issuer: URL) throws {
      guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
        throw Self.invalid("the issuer's metadata is not a JSON object")
      }
      guard let named = object["issuer"] as? String, named == issuer.absoluteString else {
        let shown = (object["issuer"] as? String).map { Sanitizer.clean($0, maxLength: 200) }
        throw AuthCoordinatorError(
          .issuerMismatch,
          "the metadata names the issuer \(shown.map { "\"\($0)\"" } ?? "(none)"), not "
            + "\"\(URLRedaction.redacted(issuer))\" (RFC 8414 §3.3): it is not used",
          transient: false)
      }
      let insecureAllowed = Self.isLoopbackHTTP(issuer)
      func endpoint(_ field: String) throws -> URL? {
        guard let value = object[field], !(value is NSNull) else { return nil }
        guard let text = value as? String, let url = URL(string: text), url.host != nil,
          let scheme = url.scheme?.lowercased()
        else { throw Self.invalid("the issuer's metadata has a \(field) that is not a URL") }
        guard scheme == "https" || (scheme == "http" && insecureAllowed) else {
          throw Self.invalid(
            "the issuer's metadata has a \(field) that is not https "
              + "(\(URLRedaction.redacted(url))); http is allowed only for an http issuer on "
              + "a loopback address")
        }
        return url
      }
      guard let tokenEndpoint = try endpoint("token_endpoint") else {
        throw Self.invalid("the issuer's metadata has no token_endpoint")
      }
      let methods = object["token_endpoint_auth_methods_supported"]
      if methods != nil, !(methods is NSNull), !(methods is [String]) {
        throw Self.invalid(
          "the issuer's metadata has a token_endpoint_auth_methods_supported that is not a list "
            + "of names")
      }
      self.init(
        issuer: issuer, tokenEndpoint: tokenEndpoint,
        revocationEndpoint: try endpoint("revocation_endpoint"),
        tokenEndpointAuthMethodsSupported: methods as? [String] ?? ["client_secret_basic"])
    }

    /// Whether `url` is `http` on 127.0.0.0/8, `::1` or `localhost`: a test's issuer.
    static func isLoopbackHTTP(_ url: URL) -> Bool {
      guard url.scheme?.lowercased() == "http", let host = url.host?.lowercased() else {
        return false
      }
      return host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
    }

    static func invalid(_ message: String) -> AuthCoordinatorError {
      AuthCoordinatorError(.discoveryFailed, message, transient: false)
    }
  }
}

extension OAuth2Authorizer.ClientAuthentication {
  /// The names of `token_endpoint_auth_methods_supported` (RFC 8414 §2, the IANA registry of
  /// RFC 7591) any of which the server must list for this authentication, or `nil` when it has
  /// no registered name (a client assertion of another type than a JWT), which is not checked.
  var metadataNames: [String]? {
    switch method {
    case .basic: return ["client_secret_basic"]
    case .post: return ["client_secret_post"]
    case .none: return ["none"]
    case .assertion(let type, let name, _):
      if name == "private_key_jwt" { return ["private_key_jwt"] }
      return type == Self.jwtBearerAssertionType ? ["private_key_jwt", "client_secret_jwt"] : nil
    }
  }
}
