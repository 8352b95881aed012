import AuthCoordinator
import Foundation
import SyncPrimitives

/// Obtains auth codes through the Inside SDK, the way the vendor guide does: the
/// ``AuthCodeProvider`` for account connect.
///
/// The guide ("iOS 小程序接入账户通", `getOnlineTokenWithMode:callback:`) fills an
/// `ANXAccountOpenAuthModel` (container scheme, `thirdAuth = YES`, the integrator's `authURL`,
/// `phoneNum = nil`), passes it to `[[ANXInsideService sharedService]
/// startServiceWithModel:completion:]`, and reads the completion's result through
/// `ANXProductConfigResultCodeKey` / `ANXProductConfigResultKey`; on `account_open_auth_9000`
/// the result holds `auth_code` and `app_id`. This provider runs that flow for each
/// ``authCode(for:)``:
/// 1. asks the `authURL` builder for the auth URL (the integrator's, as in the guide),
/// 2. calls the injected starter with an ``InsideAuthRequest`` and a fresh ``InsideCompletion``;
///    the starter starts the Inside service (Objective-C, iOS only) and calls the completion
///    from the SDK's completion block,
/// 3. waits for that completion, the task's cancellation, or an abandoned return.
///
/// **Matching.** The completion a starter receives belongs to that one call: no request id is
/// read from the result. Its first call completes the authorization (with the auth code, or the
/// error the result code maps to); a second one is reported as duplicate and ignored.
///
/// **Return without a completion.** The guide says that if the user comes back from Alipay
/// without acting, "过几分钟会出现授权超时失败" (an authorization timeout failure appears after a few
/// minutes), because the mechanism waits for Alipay. Forward the app's did-become-active signal
/// to ``appDidBecomeActive()``: an authorization still waiting ``returnGracePeriod`` later fails
/// at once with ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/abandoned``. The
/// coordinator's authorization deadline bounds it in any case.
///
/// **Cancellation.** Cancelling the task awaiting ``authCode(for:)`` (the coordinator's deadline,
/// a logout) resumes it at once with `CancellationError`; the SDK's completion arriving later is
/// reported as late.
///
/// ```swift
/// let provider = InsideAuthCodeProvider(
///   scheme: "mpaasinsidedemo",
///   authURL: { request in try await myServer.authURL(for: request.key.mcUid) },
///   start: { request, completion in
///     // iOS only: start ANXInsideService with an ANXAccountOpenAuthModel built from `request`,
///     // and call completion.complete(result, error: error) from its completion block.
///   })
/// let authorizer = AlipayAuthorizer(provider: provider, exchanger: myExchanger)
/// ```
///
/// > Important: Neither errors nor events ever contain an auth code.
public final class InsideAuthCodeProvider: AuthCodeProvider, Sendable {
  /// Builds the integrator's auth URL for a request (`ANXAccountOpenAuthModel.authURL`).
  public typealias AuthURLBuilder = @Sendable (AuthorizationRequest) async throws -> String
  /// Starts the Inside service for a request and arranges for `completion` to be called from
  /// the SDK's completion block. Called once per authorization; it should return promptly
  /// (dispatch to the main queue if the SDK needs it).
  public typealias Starter = @Sendable (InsideAuthRequest, InsideCompletion) -> Void

  /// The mPaaS container scheme put in every ``InsideAuthRequest``.
  public let scheme: String
  /// How long a completion may take to follow ``appDidBecomeActive()`` before a waiting
  /// authorization fails as abandoned.
  public let returnGracePeriod: Duration

  private struct Registry {
    var flights: [ObjectIdentifier: InsideCompletion] = [:]
    var nextToken: UInt64 = 0
  }

  private let clock: any Clock<Duration>
  private let codeKey: String
  private let resultKey: String
  private let authURL: AuthURLBuilder
  private let start: Starter
  private let registry = LockedState(Registry())
  private let broadcaster = EventBroadcaster<BridgeEvent>()

  /// Creates a provider.
  ///
  /// - Parameters:
  ///   - scheme: The mPaaS container scheme (`ANXAccountOpenAuthModel.scheme`).
  ///   - codeKey: The string value of the SDK's `ANXProductConfigResultCodeKey`.
  ///   - resultKey: The string value of the SDK's `ANXProductConfigResultKey`.
  ///   - clock: The clock of the return grace period. Default `ContinuousClock()`.
  ///   - returnGracePeriod: How long a completion may take after the app became active again.
  ///     Default 3 seconds.
  ///   - authURL: Builds the integrator's auth URL for a request.
  ///   - start: Starts the Inside service; see ``Starter``.
  public init(
    scheme: String,
    codeKey: String = InsideResult.defaultCodeKey,
    resultKey: String = InsideResult.defaultResultKey,
    clock: any Clock<Duration> = ContinuousClock(),
    returnGracePeriod: Duration = AlipayAuthCodeProvider.defaultReturnGracePeriod,
    authURL: @escaping AuthURLBuilder,
    start: @escaping Starter
  ) {
    self.scheme = scheme
    self.codeKey = codeKey
    self.resultKey = resultKey
    self.clock = clock
    self.returnGracePeriod = AlipayAuthCodeProvider.checkedGracePeriod(returnGracePeriod)
    self.authURL = authURL
    self.start = start
  }

  deinit {
    broadcaster.finish()
  }

  /// A new subscription to the provider's events: ``BridgeEvent/opened(requestID:)`` when the
  /// starter is called, then ``BridgeEvent/callbackMatched(requestID:)``,
  /// ``BridgeEvent/callbackRejected(reason:requestID:)`` (duplicate or late completions) or
  /// ``BridgeEvent/abandonedAfterReturn(requestID:)``. The streams end when the provider is
  /// deallocated.
  public var events: AsyncStream<BridgeEvent> { broadcaster.subscribe() }

  /// The ids of the authorizations waiting for their completion now, sorted (for diagnostics).
  public var pendingRequestIDs: [String] {
    registry.withLock { $0.flights.values.map(\.requestID) }.sorted()
  }

  /// Starts the Inside service for `request` and waits for its completion.
  ///
  /// - Parameter request: The authorization.
  /// - Returns: The auth code of an `account_open_auth_9000` result.
  /// - Throws: `CancellationError` when the task is cancelled; the builder's error when it
  ///   throws; an ``/AuthCoordinator/AuthCoordinatorError`` with the result's mapped code (see
  ///   ``InsideResult``), or ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/abandoned``
  ///   after an abandoned return.
  public func authCode(for request: AuthorizationRequest) async throws -> AuthCode {
    try Task.checkCancellation()
    let url = try await authURL(request)
    try Task.checkCancellation()
    let completion = InsideCompletion(
      requestID: request.requestID, codeKey: codeKey, resultKey: resultKey,
      broadcaster: broadcaster)
    let key = ObjectIdentifier(completion)
    registry.withLock { $0.flights[key] = completion }
    defer { registry.withLock { _ = $0.flights.removeValue(forKey: key) } }
    let insideRequest = InsideAuthRequest(
      requestID: request.requestID, key: request.key, scheme: scheme, authURL: url)
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        guard completion.park(continuation) else { return }
        broadcaster.emit(.opened(requestID: request.requestID))
        start(insideRequest, completion)
      }
    } onCancel: {
      completion.cancel()
    }
  }

  /// Tells the provider the app became active (forward `applicationDidBecomeActive` or
  /// `sceneDidBecomeActive`): every authorization still waiting for its completion
  /// ``returnGracePeriod`` later fails as abandoned. A running grace timer is not restarted.
  public func appDidBecomeActive() {
    let flights = registry.withLock { registry -> [(InsideCompletion, UInt64)] in
      registry.flights.values.map { flight in
        registry.nextToken += 1
        return (flight, registry.nextToken)
      }
    }
    for (flight, token) in flights {
      flight.armGrace(clock: clock, period: returnGracePeriod, token: token)
    }
  }

  /// Tells the provider the app resigned active (forward `applicationWillResignActive`):
  /// disarms the grace timers started by ``appDidBecomeActive()``.
  public func appWillResignActive() {
    for flight in registry.withLock({ Array($0.flights.values) }) { flight.disarmGrace() }
  }
}
