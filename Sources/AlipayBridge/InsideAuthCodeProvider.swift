import AuthCoordinator
import Foundation
import SyncPrimitives

/// What the Inside SDK's `ANXAccountOpenAuthModel` is filled from, for one authorization.
///
/// The vendor guide ("iOS 小程序接入账户通", `getOnlineTokenWithMode:callback:`) fills the model
/// like this, and the starter you give ``InsideAuthCodeProvider`` should do the same:
///
/// | model field | value |
/// |---|---|
/// | `scheme` | ``scheme``, the mPaaS container scheme (the guide's `PortalScheme`) |
/// | `thirdAuth` | ``thirdAuth``, always `YES` |
/// | `authURL` | ``authURL``, provided by the integrator ("接入方提供 AuthURL") |
/// | `phoneNum` | ``phoneNumber``, always `nil` |
public struct InsideAuthRequest: Sendable, Hashable {
  /// The coordinator's id for this authorization (for logs; the Inside SDK does not echo it).
  public let requestID: String
  /// The account being authorized.
  public let key: AccountKey
  /// `ANXAccountOpenAuthModel.scheme`: the mPaaS container scheme.
  public let scheme: String
  /// `ANXAccountOpenAuthModel.authURL`: the integrator's auth URL.
  public let authURL: String
  /// `ANXAccountOpenAuthModel.thirdAuth`: `true`, as in the guide.
  public var thirdAuth: Bool { true }
  /// `ANXAccountOpenAuthModel.phoneNum`: `nil`, as in the guide.
  public var phoneNumber: String? { nil }

  /// Creates a request.
  ///
  /// - Parameters:
  ///   - requestID: The coordinator's id for the authorization.
  ///   - key: The account.
  ///   - scheme: The container scheme.
  ///   - authURL: The integrator's auth URL.
  public init(requestID: String, key: AccountKey, scheme: String, authURL: String) {
    self.requestID = requestID
    self.key = key
    self.scheme = scheme
    self.authURL = authURL
  }
}

/// The completion ``InsideAuthCodeProvider`` hands its starter for one call of
/// `startServiceWithModel:completion:`: call it from the SDK's completion block.
///
/// A completion belongs to the one call that started it, so the result needs no request id
/// (the guide's `account_open_auth_9000` result holds only `auth_code` and `app_id`). The first
/// call completes the authorization with the result's auth code or its mapped error (see
/// ``InsideResult``); any later call completes nothing and is reported as
/// ``BridgeEvent/RejectReason/duplicate``. A call after the authorization ended without one
/// (cancelled, deadline, abandoned on return) is reported as ``BridgeEvent/RejectReason/late``.
/// Safe to call from any thread.
public final class InsideCompletion: Sendable {
  private enum Phase {
    case starting
    case parked(CheckedContinuation<AuthCode, any Error>)
    case completed
    case ended
  }

  private struct State {
    var phase = Phase.starting
    var graceToken: UInt64?
    var graceTimer: Task<Void, Never>?
  }

  /// The coordinator's id of the authorization this completion belongs to.
  public let requestID: String

  private let codeKey: String
  private let resultKey: String
  private let broadcaster: EventBroadcaster<BridgeEvent>
  private let state = LockedState(State())

  init(
    requestID: String, codeKey: String, resultKey: String,
    broadcaster: EventBroadcaster<BridgeEvent>
  ) {
    self.requestID = requestID
    self.codeKey = codeKey
    self.resultKey = resultKey
    self.broadcaster = broadcaster
  }

  /// Completes the authorization with the SDK's completion arguments.
  ///
  /// The dictionary is read at once, on the caller's thread, with ``InsideResult`` and the
  /// provider's code and result keys. A `nil` or code-less result fails with
  /// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/authorizationFailed``.
  ///
  /// - Parameters:
  ///   - result: The SDK's `result` dictionary.
  ///   - error: The SDK's `error`; used only when the result carries no code.
  /// - Returns: Whether this call completed the authorization.
  @discardableResult
  public func complete(_ result: [AnyHashable: Any]?, error: (any Error)? = nil) -> CallbackMatch {
    let parsed = InsideResult(result ?? [:], codeKey: codeKey, resultKey: resultKey)
    if parsed.code == nil, let error {
      let nsError = error as NSError
      return finish(
        .failure(
          AuthCoordinatorError(
            .authorizationFailed,
            "the Inside SDK reported an error (\(nsError.domain) \(nsError.code))")))
    }
    return complete(parsed)
  }

  /// Completes the authorization with an already parsed result.
  ///
  /// - Parameter result: The result.
  /// - Returns: Whether this call completed the authorization.
  @discardableResult
  public func complete(_ result: InsideResult) -> CallbackMatch {
    finish(result.outcome)
  }

  private func finish(_ outcome: Result<AuthCode, AuthCoordinatorError>) -> CallbackMatch {
    enum Action {
      case resume(CheckedContinuation<AuthCode, any Error>, Task<Void, Never>?)
      case reject(BridgeEvent.RejectReason)
    }
    let action = state.withLock { state -> Action in
      switch state.phase {
      case .parked(let waiter):
        state.phase = .completed
        defer { (state.graceTimer, state.graceToken) = (nil, nil) }
        return .resume(waiter, state.graceTimer)
      case .completed: return .reject(.duplicate)
      case .starting, .ended: return .reject(.late)
      }
    }
    switch action {
    case .resume(let waiter, let timer):
      timer?.cancel()
      broadcaster.emit(.callbackMatched(requestID: requestID))
      waiter.resume(with: outcome.mapError { $0 })
      return .matched(requestID: requestID)
    case .reject(let reason):
      let shown = SafepayCallback.clip(requestID)
      broadcaster.emit(.callbackRejected(reason: reason, requestID: shown))
      return .rejected(reason: reason, requestID: shown)
    }
  }

  /// Parks the waiter; `false` (after resuming it with `CancellationError`) when the
  /// authorization was cancelled first.
  func park(_ waiter: CheckedContinuation<AuthCode, any Error>) -> Bool {
    let parked = state.withLock { state -> Bool in
      guard case .starting = state.phase else { return false }
      state.phase = .parked(waiter)
      return true
    }
    if !parked { waiter.resume(throwing: CancellationError()) }
    return parked
  }

  /// The task awaiting the authorization was cancelled.
  func cancel() {
    let (waiter, timer) = state.withLock {
      state -> (CheckedContinuation<AuthCode, any Error>?, Task<Void, Never>?) in
      let timer = state.graceTimer
      switch state.phase {
      case .parked(let waiter):
        state.phase = .ended
        return (waiter, timer)
      case .starting:
        state.phase = .ended
        return (nil, timer)
      case .completed, .ended:
        return (nil, nil)
      }
    }
    timer?.cancel()
    waiter?.resume(throwing: CancellationError())
  }

  /// Arms the return grace timer unless one runs or the authorization is not waiting.
  func armGrace(clock: any Clock<Duration>, period: Duration, token: UInt64) {
    let armed = state.withLock { state -> Bool in
      guard case .parked = state.phase, state.graceToken == nil else { return false }
      state.graceToken = token
      return true
    }
    guard armed else { return }
    let timer = Task { [weak self] in
      do { try await clock.sleep(for: period) } catch { return }
      self?.graceExpired(token)
    }
    let kept = state.withLock { state -> Bool in
      guard state.graceToken == token else { return false }
      state.graceTimer = timer
      return true
    }
    if !kept { timer.cancel() }
  }

  /// Disarms the return grace timer.
  func disarmGrace() {
    let timer = state.withLock { state -> Task<Void, Never>? in
      defer { (state.graceTimer, state.graceToken) = (nil, nil) }
      return state.graceTimer
    }
    timer?.cancel()
  }

  private func graceExpired(_ token: UInt64) {
    let waiter = state.withLock { state -> CheckedContinuation<AuthCode, any Error>? in
      guard state.graceToken == token, case .parked(let waiter) = state.phase else { return nil }
      state.phase = .ended
      (state.graceTimer, state.graceToken) = (nil, nil)
      return waiter
    }
    guard let waiter else { return }
    broadcaster.emit(.abandonedAfterReturn(requestID: requestID))
    waiter.resume(throwing: PendingAuthorizations<Void, Void>.abandonedError)
  }
}

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
