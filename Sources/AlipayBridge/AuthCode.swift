import AuthCoordinator

/// A one-time authorization code returned by Alipay, to be exchanged for a token.
///
/// The code is single use: it is never persisted, never logged, and never exchanged twice.
/// Its `description` does not show the code.
public struct AuthCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
  /// The code itself (`auth_code`).
  public var value: String
  /// The Alipay app id the code was issued for (`app_id`), when the callback carried one.
  public var appID: String?
  /// The Alipay user id (`user_id`), when the callback carried one.
  public var userID: String?

  /// Creates an auth code.
  ///
  /// - Parameters:
  ///   - value: The code.
  ///   - appID: The app id, if known.
  ///   - userID: The Alipay user id, if known.
  public init(_ value: String, appID: String? = nil, userID: String? = nil) {
    self.value = value
    self.appID = appID
    self.userID = userID
  }

  /// `AuthCode(<redacted N bytes>, appID: ...)`.
  public var description: String {
    "AuthCode(<redacted \(value.utf8.count) bytes>\(appID.map { ", appID: \($0)" } ?? ""))"
  }

  /// The same as ``description``.
  public var debugDescription: String { description }
}

extension AuthCode: CustomReflectable {
  /// A reflection that replaces the code, so `dump(code)` does not reveal it.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "value": "<redacted \(value.utf8.count) bytes>", "appID": appID as Any,
        "userID": userID as Any,
      ],
      displayStyle: .struct)
  }
}

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
