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

    /// `clientCredentials` or `authorizationCode`.
    public var description: String {
      switch self {
      case .clientCredentials: return "clientCredentials"
      case .authorizationCode: return "authorizationCode"
      }
    }

    var isClientCredentials: Bool {
      if case .clientCredentials = self { return true }
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
