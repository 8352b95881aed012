import AuthCoordinator
import Foundation

/// The tokens of one token-exchange request (RFC 8693 §2.1).
struct TokenExchangeForm: Sendable {
  /// `urn:ietf:params:oauth:grant-type:token-exchange`.
  static let grantType = "urn:ietf:params:oauth:grant-type:token-exchange"

  /// The `subject_token` and its `subject_token_type`.
  var subject: OAuth2Authorizer.SecurityToken
  /// The `actor_token` and its `actor_token_type`, if any.
  var actor: OAuth2Authorizer.SecurityToken?
  /// The `requested_token_type`, if any.
  var requestedTokenType: OAuth2Authorizer.SecurityToken.TokenType?

  /// The grant's own form fields, after `grant_type` and `scope`.
  var formItems: [(String, String)] {
    var items: [(String, String)] = []
    if let requestedTokenType {
      items.append(("requested_token_type", requestedTokenType.rawValue))
    }
    items += [("subject_token", subject.token), ("subject_token_type", subject.type.rawValue)]
    if let actor {
      items += [("actor_token", actor.token), ("actor_token_type", actor.type.rawValue)]
    }
    return items
  }

  /// The tokens, never to be printed.
  var secrets: [String] { [subject.token] + (actor.map { [$0.token] } ?? []) }
}

extension OAuth2Authorizer {
  /// The grant type of the token exchange grant (RFC 8693 §2.1):
  /// `urn:ietf:params:oauth:grant-type:token-exchange`.
  public static let tokenExchangeGrantType = TokenExchangeForm.grantType

  /// The tokens of one exchange: each source asked once, now.
  ///
  /// - Throws: ``AuthCoordinatorError/Code-swift.struct/subjectTokenFailed`` or
  ///   ``AuthCoordinatorError/Code-swift.struct/actorTokenFailed`` when a source fails or
  ///   returns an empty token or type; what a source throws as an `AuthCoordinatorError`;
  ///   `CancellationError`.
  func tokenExchange(
    for request: AuthorizationRequest, subject: TokenSource, actor: TokenSource?,
    requestedTokenType: SecurityToken.TokenType?
  ) async throws -> TokenExchangeForm {
    let subjectToken = try await Self.integratorValue(.subjectTokenFailed, "the subject token") {
      try await subject.make(request)
    }
    try Self.checkNotEmpty(subjectToken, .subjectTokenFailed, "subject")
    var actorToken: SecurityToken?
    if let actor {
      do {
        actorToken = try await Self.integratorValue(.actorTokenFailed, "the actor token") {
          try await actor.make(request)
        }
      } catch var error as AuthCoordinatorError where error.code == .subjectTokenFailed {
        // `TokenSource.accessToken(of:from:)` names no role: here it was the actor's.
        error.code = .actorTokenFailed
        throw error
      }
      try Self.checkNotEmpty(actorToken, .actorTokenFailed, "actor")
    }
    return TokenExchangeForm(
      subject: subjectToken, actor: actorToken, requestedTokenType: requestedTokenType)
  }

  private static func checkNotEmpty(
    _ token: SecurityToken?, _ code: AuthCoordinatorError.Code, _ role: String
  ) throws {
    guard let token, !token.token.isEmpty, !token.type.rawValue.isEmpty else {
      throw AuthCoordinatorError(
        code, "the \(role) token's source returned an empty token or type", transient: false)
    }
  }

  /// Checks a token-exchange reply's `issued_token_type` (RFC 8693 §2.2.1) against the
  /// requested type.
  ///
  /// - Returns: The issued type, for `extraInfo`, or `nil` when the reply has none.
  /// - Throws: ``AuthCoordinatorError/Code-swift.struct/issuedTokenTypeMismatch``, terminal,
  ///   when a type was requested and the reply names another one or none.
  static func issuedTokenType(
    _ reply: [String: Any], for exchange: TokenExchangeForm
  ) throws -> String? {
    let issued = reply["issued_token_type"] as? String
    if let requested = exchange.requestedTokenType, issued != requested.rawValue {
      let shown = issued.map { "\"\(Sanitizer.clean($0, maxLength: 100))\"" } ?? "no type"
      throw AuthCoordinatorError(
        .issuedTokenTypeMismatch,
        "the token endpoint answered the token-exchange request for \(requested.rawValue) "
          + "with \(shown): the token is not served", transient: false)
    }
    return issued
  }
}
