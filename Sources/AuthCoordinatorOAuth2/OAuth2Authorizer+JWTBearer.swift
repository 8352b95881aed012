import AuthCoordinator
import Foundation

extension OAuth2Authorizer {
  /// Makes the signed JWT of one JWT bearer grant request (``Grant/jwtBearer(assertion:)``):
  /// the integrator's signing closure, given the ``AssertionRequest`` (the token endpoint as
  /// `aud`, a fresh `jti`, the time for `iat`) and the authorization it serves (its key names
  /// the JWT's `sub`).
  public typealias JWTBearerAssertionProvider =
    @Sendable (AssertionRequest, AuthorizationRequest) async throws -> String

  /// The grant type of the JWT bearer grant (RFC 7523 §2.1):
  /// `urn:ietf:params:oauth:grant-type:jwt-bearer`.
  public static let jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"

  /// A fresh assertion for one jwt-bearer request: the closure is called now, with a new
  /// `jti`.
  ///
  /// - Throws: ``AuthCoordinatorError/Code-swift.struct/jwtBearerAssertionFailed`` when the
  ///   closure throws (transient for a `URLError`) or returns an empty assertion; an
  ///   `AuthCoordinatorError` it throws, as it is; `CancellationError`.
  func jwtBearerAssertion(
    for request: AuthorizationRequest, make: JWTBearerAssertionProvider
  ) async throws -> String {
    let assertionRequest = AssertionRequest(
      clientID: effectiveClientID, audience: tokenEndpoint, endpoint: tokenEndpoint,
      jti: UUID().uuidString, issuedAt: now())
    let assertion = try await Self.integratorValue(
      .jwtBearerAssertionFailed, "the jwt-bearer assertion"
    ) { try await make(assertionRequest, request) }
    guard !assertion.isEmpty else {
      throw AuthCoordinatorError(
        .jwtBearerAssertionFailed, "the jwt-bearer assertion closure returned an empty assertion",
        transient: false)
    }
    return assertion
  }
}
