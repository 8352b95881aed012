import AuthCoordinator

/// The standard authorizer for account connect: an auth code from a provider (the bounce to
/// Alipay), then the exchange at the integrator's server under the exchange deadline.
///
/// ```swift
/// let authorizer = AlipayAuthorizer(provider: bridgeProvider, exchanger: httpExchanger)
/// ```
public struct AlipayAuthorizer: Authorizer {
  /// Where auth codes come from.
  public let provider: any AuthCodeProvider
  /// Where auth codes become models.
  public let exchanger: any TokenExchanger

  /// Creates the authorizer.
  ///
  /// - Parameters:
  ///   - provider: Obtains the auth code.
  ///   - exchanger: Exchanges it.
  public init(provider: any AuthCodeProvider, exchanger: any TokenExchanger) {
    self.provider = provider
    self.exchanger = exchanger
  }

  /// Obtains a code, then exchanges it inside
  /// ``/AuthCoordinator/AuthorizationRequest/exchange(_:)``.
  ///
  /// - Parameter request: The authorization.
  /// - Returns: The model.
  /// - Throws: The provider's or the exchanger's error; an error with code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired`` when the
  ///   request does not allow interaction (the coordinator of an app extension).
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    // Account connect always sends the user to Alipay: impossible from an app extension.
    guard request.allowsInteraction else {
      throw AuthCoordinatorError(
        .interactionRequired,
        "authorizing with Alipay needs the app in the foreground; this coordinator may not"
          + " interact (an extension): open the app, or wait for it to store a model")
    }
    let code = try await provider.authCode(for: request)
    try Task.checkCancellation()
    return try await request.exchange { try await exchanger.exchange(code, for: request) }
  }
}
