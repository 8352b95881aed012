import AuthCoordinator

extension OAuth2Authorizer {
  /// What the authorizer does when it holds no refresh token: the grant that starts a new token
  /// family.
  public enum Grant: Sendable, CustomStringConvertible {
    /// The client credentials grant (RFC 6749 §4.4): the client acts on its own behalf.
    case clientCredentials
    /// The authorization code grant (RFC 6749 §4.1): the closure obtains a code (from a
    /// browser redirect, a device, another app) for the request and returns it with the
    /// redirect URI and, for PKCE (RFC 7636), the code verifier. It is asked only when the
    /// request allows interaction.
    case authorizationCode(@Sendable (AuthorizationRequest) async throws -> AuthorizationCode)
    /// The token exchange grant (RFC 8693): the client trades a token it holds, the
    /// `subject`'s (a user's access token, a workload's JWT), for one of its own, optionally
    /// with an `actor` token (delegation, RFC 8693 §1.1) and asking for a
    /// `requestedTokenType`. The request carries the scope, audience and resources of the
    /// key's ``TokenRequest`` (or the authorizer's ``scope`` and ``parameters``), as a client
    /// credentials grant does.
    ///
    /// Each source is asked once for every exchange request, never cached: a refresh sends the
    /// refresh token instead, and the exchange that follows a refused refresh asks again. A reply
    /// whose `issued_token_type` is not the requested type is refused with
    /// ``AuthCoordinatorError/Code-swift.struct/issuedTokenTypeMismatch``; the
    /// issued type is in the model's `extraInfo["issued_token_type"]`. Silent: a request that
    /// allows no interaction (a refresh ahead) runs it.
    case tokenExchange(
      subject: TokenSource, actor: TokenSource? = nil,
      requestedTokenType: SecurityToken.TokenType? = nil)
    /// The JWT bearer grant (RFC 7523 §2.1): the closure makes a signed JWT (the package holds
    /// no key and does no cryptography) from an ``AssertionRequest`` (the token endpoint as
    /// audience, a fresh `jti`, the time) and the authorization it serves (its key names the
    /// subject), and the request sends it as the `assertion`, with the scope, audience and
    /// resources of the key's ``TokenRequest`` (or the authorizer's own).
    ///
    /// The closure is called for every jwt-bearer request, never reused: an assertion is spent
    /// once. Silent: a request that allows no interaction (a refresh ahead) runs it.
    case jwtBearer(assertion: JWTBearerAssertionProvider)

    /// `clientCredentials`, `authorizationCode`, `tokenExchange` or `jwtBearer`.
    public var description: String {
      switch self {
      case .clientCredentials: return "clientCredentials"
      case .authorizationCode: return "authorizationCode"
      case .tokenExchange: return "tokenExchange"
      case .jwtBearer: return "jwtBearer"
      }
    }

    /// Whether the grant may involve the user: only the authorization code grant, whose
    /// closure may send them to a consent page.
    var isInteractive: Bool {
      if case .authorizationCode = self { return true }
      return false
    }
  }

  /// An authorization code to exchange, as the ``Grant/authorizationCode(_:)`` closure returns
  /// it.
  ///
  /// Its description and reflection show neither the code nor the verifier.
  public struct AuthorizationCode: Sendable, CustomStringConvertible, CustomReflectable {
    /// The one-time code the authorization server issued. Sent once, never printed.
    public var code: String
    /// The `redirect_uri` the authorization request carried, when it carried one (RFC 6749
    /// §4.1.3 requires the same value in the token request).
    public var redirectURI: String?
    /// The PKCE `code_verifier` (RFC 7636 §4.5), when the authorization request sent a
    /// challenge. Never printed.
    public var codeVerifier: String?

    /// Creates a code to exchange.
    ///
    /// - Parameters:
    ///   - code: The one-time authorization code.
    ///   - redirectURI: The redirect URI of the authorization request, if it had one.
    ///   - codeVerifier: The PKCE code verifier, if a challenge was sent.
    public init(code: String, redirectURI: String? = nil, codeVerifier: String? = nil) {
      self.code = code
      self.redirectURI = redirectURI
      self.codeVerifier = codeVerifier
    }

    /// `AuthorizationCode(code: <redacted>, redirectURI: ..., codeVerifier: <redacted>)`.
    public var description: String {
      let verifier = codeVerifier == nil ? "nil" : "<redacted>"
      return
        "AuthorizationCode(code: <redacted>, redirectURI: \(redirectURI ?? "nil"), "
        + "codeVerifier: \(verifier))"
    }

    /// A reflection without the code or the verifier, so `dump` does not reveal them.
    public var customMirror: Mirror {
      Mirror(
        self,
        children: [
          "code": "<redacted>", "redirectURI": redirectURI as Any,
          "codeVerifier": (codeVerifier == nil ? nil : "<redacted>") as Any,
        ],
        displayStyle: .struct)
    }
  }
}
