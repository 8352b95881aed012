import AuthCoordinator

/// Obtains an auth code for a request: in an app, by bouncing the user to Alipay and waiting for
/// the callback URL.
public protocol AuthCodeProvider: Sendable {
  /// Obtains an auth code.
  ///
  /// The coordinator bounds this call by its authorization deadline and cancels it when the
  /// flight is cancelled; implementations must resume promptly on cancellation.
  ///
  /// - Parameter request: The authorization, with the request id to send as `target_id`/`state`.
  /// - Returns: The auth code.
  /// - Throws: An ``/AuthCoordinator/AuthCoordinatorError`` with the result's code (user cancelled,
  ///   too old, ...).
  func authCode(for request: AuthorizationRequest) async throws -> AuthCode
}
