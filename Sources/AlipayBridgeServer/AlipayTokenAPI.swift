import AuthCoordinator
import AuthCoordinatorOAuth2
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A client of Alipay's `alipay.system.oauth.token` (换取授权访问令牌): redeems an auth code,
/// or refreshes with a refresh token, on the integrator's server, where the application's
/// private key and the refresh tokens live.
///
/// Each call is one signed `POST` of a form to the gateway: the common parameters (`app_id`,
/// `method`, `format`, `charset`, `sign_type`, `timestamp` in GMT+8, `version` 1.0), the
/// grant's (`grant_type` with `code` or `refresh_token`), and `sign`, which ``signer``
/// computes over the sign content (``signContent(_:)``). This package holds no key and does no
/// cryptography: the integrator's signer does SHA256withRSA (RSA2) with the application's
/// private key on their platform.
///
/// ```swift
/// let api = AlipayTokenAPI(appID: "2021000000000000") { content in
///   try await keyVault.signSHA256WithRSA(Data(content.utf8)).base64EncodedString()
/// }
/// let grant = try await api.redeem(code: authCode)
/// ```
///
/// A call is never retried here: a refresh token may be spent by a request whose answer was
/// lost, and the coordinator decides about retries. Errors are
/// ``/AuthCoordinator/AuthCoordinatorError``s with an ``AlipayTokenAPIError`` as
/// ``/AuthCoordinator/AuthCoordinatorError/underlying``:
/// - the user must authorize again (the code or refresh token is invalid, spent or expired):
///   code ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired``,
///   terminal, with ``/AuthCoordinator/AuthCoordinatorError/refusesRefreshToken`` set for a
///   refused refresh token;
/// - transient (HTTP 5xx or 429, `isp.*` or `aop.unknow-error` sub codes, code 20000, a system
///   error): code ``AuthCoordinator/AuthCoordinatorError/Code/alipayTokenAPIFailed``
///   with ``/AuthCoordinator/AuthCoordinatorError/isTransient`` `true` and the reply's
///   `Retry-After`; a transport failure or timeout: code
///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/networkError``, transient;
/// - everything else (a bad signature, an invalid app id, missing permissions, a malformed
///   reply, a sub code this package does not know): ``AuthCoordinator/AuthCoordinatorError/Code/alipayTokenAPIFailed``,
///   terminal.
///
/// > Important: No error, message or description contains a token, an auth code or a
/// > signature.
public struct AlipayTokenAPI: Sendable {
  /// Alipay's production gateway, `https://openapi.alipay.com/gateway.do`.
  public static let productionGateway = URL(string: "https://openapi.alipay.com/gateway.do")!
  /// The API's method name, `alipay.system.oauth.token`.
  public static let method = "alipay.system.oauth.token"

  /// The gateway the requests go to. Default ``productionGateway``.
  public var gateway: URL
  /// The application id Alipay assigned (`app_id`).
  public var appID: String
  /// Signs the exact sign content of a request and returns the Base64 signature (`sign`):
  /// SHA256withRSA with the application's private key for `RSA2`. A `URLError` it throws is
  /// reported as a transient network error; anything else as a terminal failure.
  public var signer: @Sendable (String) async throws -> String
  /// The `sign_type`. Default `RSA2`.
  public var signType: String
  /// The `charset`. Default `utf-8`.
  public var charset: String
  /// How long one request may take, from its start to the last byte of the reply. Default
  /// 5 seconds.
  public var timeout: Duration
  /// The most reply bytes read; a longer reply is a terminal failure. Default 1 MiB.
  public var maxBodySize: Int
  /// Where the requests go. Default a ``/AuthCoordinatorOAuth2/URLSessionTransport`` on
  /// `URLSession.shared`; every request asks for a fresh connection, as token requests do.
  public var transport: any HTTPTransport
  /// The wall clock of the `timestamp` parameter and of the grants' ends. Default `Date()`.
  public var now: @Sendable () -> Date

  /// Creates a client.
  ///
  /// - Parameters:
  ///   - appID: The application id.
  ///   - gateway: The gateway; ``productionGateway`` by default.
  ///   - signType: The `sign_type`; `RSA2` by default.
  ///   - charset: The `charset`; `utf-8` by default.
  ///   - timeout: The bound of one request; 5 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - transport: Where the requests go; a ``/AuthCoordinatorOAuth2/URLSessionTransport`` by
  ///     default.
  ///   - now: The wall clock; `Date()` by default.
  ///   - signer: Signs a sign content and returns the Base64 signature.
  public init(
    appID: String, gateway: URL = productionGateway, signType: String = "RSA2",
    charset: String = "utf-8", timeout: Duration = .seconds(5), maxBodySize: Int = 1 << 20,
    transport: (any HTTPTransport)? = nil, now: @escaping @Sendable () -> Date = { Date() },
    signer: @escaping @Sendable (String) async throws -> String
  ) {
    self.appID = appID
    self.gateway = gateway
    self.signType = signType
    self.charset = charset
    self.timeout = timeout
    self.maxBodySize = maxBodySize
    self.transport = transport ?? URLSessionTransport()
    self.now = now
    self.signer = signer
  }

  /// Redeems an auth code the user brought back from Alipay (`grant_type=authorization_code`).
  ///
  /// - Parameter code: The auth code; single use.
  /// - Returns: The grant.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` (see the type's discussion);
  ///   `CancellationError` when the task is cancelled.
  public func redeem(code: String) async throws -> AlipayTokenGrant {
    try await send(.authorizationCode(code))
  }

  /// Refreshes with a refresh token (`grant_type=refresh_token`). Alipay answers a new access
  /// token and a new refresh token; the family's end does not move.
  ///
  /// - Parameter refreshToken: The refresh token of the last grant.
  /// - Returns: The grant.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` (see the type's discussion), with
  ///   ``/AuthCoordinator/AuthCoordinatorError/refusesRefreshToken`` when Alipay refused the
  ///   refresh token; `CancellationError` when the task is cancelled.
  public func refresh(refreshToken: String) async throws -> AlipayTokenGrant {
    try await send(.refreshToken(refreshToken))
  }

  /// Sends one grant and reads its reply.
  func send(_ grant: Grant) async throws -> AlipayTokenGrant {
    try Task.checkCancellation()
    let sentAt = now()
    let urlRequest = try await makeRequest(grant, at: sentAt)
    let outcome: HTTPTransportOutcome
    do {
      outcome = try await transport.send(
        HTTPTransportRequest(
          urlRequest, maxBodySize: maxBodySize, timeout: timeout, requiresFreshConnection: true))
    } catch let error as URLError {
      throw Self.transportFailure(error.code, grant: grant, timeout: timeout)
    }
    return try grantReply(outcome, grant: grant, sentAt: sentAt)
  }
}
