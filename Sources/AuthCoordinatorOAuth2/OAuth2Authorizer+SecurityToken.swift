import AuthCoordinator
import Foundation

extension OAuth2Authorizer {
  /// A token that a token exchange (RFC 8693) sends, a subject token or an actor token, with
  /// its type.
  ///
  /// ```swift
  /// OAuth2Authorizer.SecurityToken(token: userAccessToken, type: .accessToken)
  /// OAuth2Authorizer.SecurityToken(token: workloadJWT, type: .jwt)
  /// ```
  ///
  /// Its description and reflection never show the token.
  public struct SecurityToken: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// A token type identifier (RFC 8693 §3): what a `subject_token_type`,
    /// `actor_token_type`, `requested_token_type` or `issued_token_type` names.
    public struct TokenType: RawRepresentable, Sendable, Hashable, ExpressibleByStringLiteral,
      CustomStringConvertible
    {
      /// The URI, such as `urn:ietf:params:oauth:token-type:access_token`.
      public var rawValue: String

      /// A type by its URI.
      ///
      /// - Parameter rawValue: The token type identifier.
      public init(rawValue: String) { self.rawValue = rawValue }

      /// A type by its URI, written as a string literal.
      ///
      /// - Parameter value: The token type identifier.
      public init(stringLiteral value: String) { self.rawValue = value }

      /// The URI.
      public var description: String { rawValue }

      /// An OAuth 2 access token: `urn:ietf:params:oauth:token-type:access_token`.
      public static let accessToken: Self = "urn:ietf:params:oauth:token-type:access_token"
      /// An OAuth 2 refresh token: `urn:ietf:params:oauth:token-type:refresh_token`.
      public static let refreshToken: Self = "urn:ietf:params:oauth:token-type:refresh_token"
      /// An OpenID Connect ID token: `urn:ietf:params:oauth:token-type:id_token`.
      public static let idToken: Self = "urn:ietf:params:oauth:token-type:id_token"
      /// A JWT (RFC 7519): `urn:ietf:params:oauth:token-type:jwt`.
      public static let jwt: Self = "urn:ietf:params:oauth:token-type:jwt"
      /// A base64url-encoded SAML 1.1 assertion: `urn:ietf:params:oauth:token-type:saml1`.
      public static let saml1: Self = "urn:ietf:params:oauth:token-type:saml1"
      /// A base64url-encoded SAML 2.0 assertion: `urn:ietf:params:oauth:token-type:saml2`.
      public static let saml2: Self = "urn:ietf:params:oauth:token-type:saml2"
    }

    /// The token itself. Sent once, never printed.
    public var token: String
    /// What kind of token it is, sent as its `subject_token_type` or `actor_token_type`.
    public var type: TokenType

    /// Creates a token to send.
    ///
    /// - Parameters:
    ///   - token: The token. Never printed.
    ///   - type: Its type.
    public init(token: String, type: TokenType) {
      self.token = token
      self.type = type
    }

    /// `SecurityToken(token: <redacted>, type: <the type>)`.
    public var description: String { "SecurityToken(token: <redacted>, type: \(type.rawValue))" }

    /// A reflection without the token, so `dump` does not reveal it.
    public var customMirror: Mirror {
      Mirror(
        self, children: ["token": "<redacted>", "type": type.rawValue], displayStyle: .struct)
    }
  }

  /// Where a token exchange's subject (or actor) token comes from: a closure asked once for
  /// every token-exchange request, never cached, given the authorization it serves.
  ///
  /// ```swift
  /// // Your own source: a workload identity read from its file, an upstream caller's token.
  /// let subject = OAuth2Authorizer.TokenSource { request in
  ///   .init(token: try await identity.currentJWT(), type: .jwt)
  /// }
  /// // The access token of another key of a coordinator.
  /// let user = OAuth2Authorizer.TokenSource.accessToken(of: userKey, from: coordinator)
  /// ```
  ///
  /// A closure that throws fails the token request: a `URLError` transiently, anything else
  /// terminally (``AuthCoordinatorError/Code-swift.struct/subjectTokenFailed`` or
  /// ``AuthCoordinatorError/Code-swift.struct/actorTokenFailed``); an
  /// ``/AuthCoordinator/AuthCoordinatorError`` it throws is passed on as it is.
  public struct TokenSource: Sendable {
    /// Makes the token for one token-exchange request.
    public typealias Provider = @Sendable (AuthorizationRequest) async throws -> SecurityToken

    let make: Provider

    /// A source that asks `make` for every token-exchange request.
    ///
    /// - Parameter make: Returns the token for the authorization it is given. Throw a
    ///   `URLError` when what holds the token could not be reached (the request fails
    ///   transiently), anything else to fail it terminally.
    public init(_ make: @escaping Provider) { self.make = make }

    /// The access token that `coordinator` serves for `key`: cached, coalesced and refreshed
    /// under that key, as any caller's. Its type is ``SecurityToken/TokenType/accessToken``.
    ///
    /// ```swift
    /// primaryGrant: .tokenExchange(subject: .accessToken(of: userKey, from: coordinator))
    /// ```
    ///
    /// `key` must not be the key of the authorization it serves: that authorization would wait
    /// for its own flight. Such a request fails at once, with
    /// ``AuthCoordinatorError/Code-swift.struct/tokenExchangeSelfReference``, terminal. A
    /// failure of `key`'s own authorization fails the exchange with
    /// ``AuthCoordinatorError/Code-swift.struct/subjectTokenFailed``, transient when that
    /// failure was.
    ///
    /// - Parameters:
    ///   - key: The key whose access token is the subject (or actor) token.
    ///   - coordinator: The coordinator that serves `key`.
    /// - Returns: The source.
    public static func accessToken(of key: AccountKey, from coordinator: AuthCoordinator) -> Self {
      accessToken(of: key, coordinator: { coordinator })
    }

    /// The access token that the coordinator `coordinator()` returns serves for `key`, for an
    /// authorizer made before its coordinator (the coordinator that runs the exchange itself,
    /// say): the closure is called for every request, and `nil` fails it with
    /// ``AuthCoordinatorError/Code-swift.struct/subjectTokenFailed``, terminal.
    ///
    /// ```swift
    /// let link = CoordinatorLink()  // your box, holding the coordinator weakly
    /// let source = OAuth2Authorizer.TokenSource.accessToken(of: userKey) { link.coordinator }
    /// ```
    ///
    /// - Parameters:
    ///   - key: The key whose access token is the subject (or actor) token.
    ///   - coordinator: Returns the coordinator that serves `key`, or `nil` when there is
    ///     none (any more).
    /// - Returns: The source; the same rules as ``accessToken(of:from:)``.
    public static func accessToken(
      of key: AccountKey, coordinator: @escaping @Sendable () -> AuthCoordinator?
    ) -> Self {
      Self { request in
        // The request's own key: its flight is the one running this closure, and waiting for
        // it would never end.
        guard key != request.key else {
          throw AuthCoordinatorError(
            .tokenExchangeSelfReference,
            "the token exchange for \(request.key) takes its token from its own key: it would "
              + "wait for itself", transient: false)
        }
        guard let coordinator = coordinator() else {
          throw AuthCoordinatorError(
            .subjectTokenFailed,
            "the token exchange for \(request.key) has no coordinator to ask for \(key)'s token",
            transient: false)
        }
        do {
          let model = try await coordinator.authModel(for: key)
          return SecurityToken(token: model.accessToken, type: .accessToken)
        } catch let error as AuthCoordinatorError {
          // The other key's failure, under a code of its own: its flags (a refused refresh
          // token) are that key's, not this one's.
          throw AuthCoordinatorError(
            .subjectTokenFailed,
            "the token exchange for \(request.key) could not get \(key)'s access token "
              + "(\(error.code.rawValue))", underlying: error, transient: error.isTransient,
            retryAfter: error.retryAfter)
        }
      }
    }
  }
}
