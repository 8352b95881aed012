import AuthCoordinator

/// Turns an auth code into a model at the integrator's server.
public protocol TokenExchanger: Sendable {
  /// Exchanges `code` once. Never retried with the same code: it is single use.
  ///
  /// - Parameters:
  ///   - code: The one-time code.
  ///   - request: The authorization it belongs to.
  /// - Returns: The model the server answered with.
  /// - Throws: An ``/AuthCoordinator/AuthCoordinatorError`` with code
  ///   ``AuthCoordinator/AuthCoordinatorError/Code/exchangeFailed`` and the cause attached.
  func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel
}
