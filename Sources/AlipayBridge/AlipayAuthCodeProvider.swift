import AuthCoordinator
import Foundation
import SyncPrimitives

/// Obtains auth codes by bouncing the user to Alipay and waiting for the callback: the
/// ``AuthCodeProvider`` an app uses for account connect.
///
/// For each ``authCode(for:)`` the provider
/// 1. registers the request under `request.requestID` (the id to send as `target_id`/`state`),
/// 2. asks the integrator's `authURL` builder for the signed URL to open (the integrator's
///    server signs it and embeds the request id),
/// 3. opens it with the injected opener (`UIApplication.shared.open` in an app),
/// 4. waits until ``deliver(_:)-(SafepayCallback)`` (usually through
///    ``AlipayCallbackRouter/handle(_:)``) or ``deliver(_:)-(InsideResult)`` hands it the
///    callback naming that request id, or the task is cancelled.
///
/// **Matching.** Only a callback whose request id (`target_id`, else `state`) equals a pending
/// request's id completes it, with its auth code or its error. A callback without an id,
/// with an unknown id, for a request already completed (duplicate) or already ended (late),
/// or that cannot be read completes nothing: it is reported as
/// ``BridgeEvent/callbackRejected(reason:requestID:)`` and the pending requests keep waiting.
/// A callback without any id is rejected even when exactly one request is pending: a forged
/// or stale callback must never complete a request, whatever it costs. (Alipay's failure
/// callbacks, such as a cancel, often carry no id; such a request then ends through the
/// return-without-callback rule or the coordinator's deadline.)
///
/// **Return without a callback.** Forward the app's did-become-active signal to
/// ``appDidBecomeActive()``. If a request's URL was opened and no matching callback arrives
/// within ``returnGracePeriod`` (on the injected clock), the request fails at once with
/// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/abandoned`` instead of waiting for the
/// deadline (the vendor's guide says its SDK reports an authorization timeout only after a few
/// minutes, "过几分钟会出现授权超时失败"). A callback arriving within the grace period wins.
/// ``appWillResignActive()`` disarms the timers (the user left again, for example to answer
/// the system's "Open in Alipay?" prompt).
///
/// **Cancellation.** Cancelling the task that awaits ``authCode(for:)`` resumes it at once with
/// `CancellationError`; a callback arriving later is reported as late. The coordinator enforces
/// its deadlines this way. The builder and the opener should honour cancellation too: a waiter
/// parked for the callback resumes at once, but the provider cannot interrupt them.
///
/// ```swift
/// let provider = AlipayAuthCodeProvider(
///   authURL: { request in try await myServer.signedAuthURL(state: request.requestID) },
///   open: { url in await UIApplication.shared.open(url) })
/// let authorizer = AlipayAuthorizer(provider: provider, exchanger: myExchanger)
/// ```
///
/// > Important: Neither errors nor events ever contain an auth code.
public final class AlipayAuthCodeProvider: AuthCodeProvider, Sendable {
  /// Builds the authorization URL to open for a request, signed by the integrator's server,
  /// with `request.requestID` embedded as `target_id` or `state`.
  public typealias AuthURLBuilder = @Sendable (AuthorizationRequest) async throws -> URL
  /// Opens a URL; returns `false` when it cannot (Alipay not installed).
  public typealias Opener = @Sendable (URL) async -> Bool

  /// The default ``returnGracePeriod``: 3 seconds.
  public static let defaultReturnGracePeriod: Duration = .seconds(3)

  /// A grace period as both providers keep it: never negative, and no longer than the clocks can
  /// sleep (`.seconds(Int64.max)`, "never", is clamped instead of trapping in the clock).
  static func checkedGracePeriod(_ period: Duration) -> Duration {
    precondition(period >= .zero, "returnGracePeriod must not be negative")
    return min(period, CoordinatorClock.longestWait)
  }

  /// How long a callback may take to follow ``appDidBecomeActive()`` before the pending request
  /// fails as abandoned.
  public let returnGracePeriod: Duration

  private typealias Machine = PendingAuthorizations<
    CheckedContinuation<AuthCode, any Error>, Task<Void, Never>
  >

  private let clock: any Clock<Duration>
  private let authURL: AuthURLBuilder
  private let open: Opener
  private let state: LockedState<Machine>
  private let broadcaster = EventBroadcaster<BridgeEvent>()

  /// Creates a provider.
  ///
  /// - Parameters:
  ///   - clock: The clock of the grace period. Default `ContinuousClock()`.
  ///   - returnGracePeriod: How long a callback may take after the app became active again.
  ///     Default 3 seconds.
  ///   - authURL: Builds the signed authorization URL for a request.
  ///   - open: Opens a URL (`UIApplication.shared.open` in an app); `false` means it could not.
  public init(
    clock: any Clock<Duration> = ContinuousClock(),
    returnGracePeriod: Duration = AlipayAuthCodeProvider.defaultReturnGracePeriod,
    authURL: @escaping AuthURLBuilder,
    open: @escaping Opener
  ) {
    self.clock = clock
    self.returnGracePeriod = AlipayAuthCodeProvider.checkedGracePeriod(returnGracePeriod)
    self.authURL = authURL
    self.open = open
    self.state = LockedState(Machine())
  }

  deinit {
    broadcaster.finish()
  }

  /// A new subscription to the provider's events: each access returns a new stream that sees
  /// the events from then on (the newest 256 are kept for a slow reader). The streams end when
  /// the provider is deallocated.
  public var events: AsyncStream<BridgeEvent> { broadcaster.subscribe() }

  /// The ids of the requests waiting now, sorted (for diagnostics).
  public var pendingRequestIDs: [String] { state.withLock { $0.pendingIDs } }

  /// Bounces the user to Alipay for `request` and waits for the matching callback.
  ///
  /// - Parameter request: The authorization; its `requestID` must be unique among pending ones.
  /// - Returns: The auth code from the matching callback.
  /// - Throws: `CancellationError` when the task is cancelled; the builder's error when it
  ///   throws; an ``/AuthCoordinator/AuthCoordinatorError`` with the callback's code (user
  ///   cancelled, network error, Alipay too old, ...), with
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/abandoned`` when the user came
  ///   back without a callback, or with
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/authorizationFailed`` when the URL
  ///   could not be opened or the request id is empty or already pending.
  public func authCode(for request: AuthorizationRequest) async throws -> AuthCode {
    let id = request.requestID
    try Task.checkCancellation()
    guard !id.isEmpty else {
      throw AuthCoordinatorError(.authorizationFailed, "the request id is empty")
    }
    guard state.withLock({ $0.register(id) }) else {
      throw AuthCoordinatorError(.authorizationFailed, "a request with this id is already pending")
    }
    return try await withTaskCancellationHandler {
      try await bounce(request)
    } onCancel: {
      let action = state.withLock { $0.cancel(id) }
      action.cancelTimer?.cancel()
      action.waiter?.resume(throwing: CancellationError())
    }
  }

  private func bounce(_ request: AuthorizationRequest) async throws -> AuthCode {
    let id = request.requestID
    let url: URL
    do {
      url = try await authURL(request)
    } catch {
      end(id)
      throw error
    }
    guard state.withLock({ $0.advance(id, to: .opening) }) else {
      end(id)
      throw CancellationError()
    }
    guard await open(url) else {
      end(id)
      broadcaster.emit(.openFailed(requestID: id))
      try Task.checkCancellation()
      throw AuthCoordinatorError(
        .authorizationFailed,
        "could not open the Alipay authorization URL (Alipay not installed, or alipay/alipays "
          + "missing from LSApplicationQueriesSchemes)")
    }
    if state.withLock({ $0.advance(id, to: .opened) }) {
      broadcaster.emit(.opened(requestID: id))
    }
    return try await withCheckedThrowingContinuation { continuation in
      switch state.withLock({ $0.park(id, continuation) }) {
      case .resume(let result): continuation.resume(with: result)
      case .parked: break
      }
    }
  }

  private func end(_ id: String) {
    state.withLock { $0.remove(id) }?.cancel()
  }

  /// Hands a parsed `safepay` callback to the pending requests.
  ///
  /// A payment result is rejected as ``BridgeEvent/RejectReason/malformed`` (it is no auth
  /// result); ``AlipayCallbackRouter`` sends payment results to the payment hook instead.
  ///
  /// - Parameter callback: The callback.
  /// - Returns: Whether it completed a request.
  @discardableResult
  public func deliver(_ callback: SafepayCallback) -> CallbackMatch {
    guard callback.kind == .auth else {
      return reject(.malformed, requestID: nil)
    }
    return deliver(
      requestID: callback.requestID, conflicting: callback.hasConflictingRequestIDs,
      outcome: callback.outcome)
  }

  /// Hands an Inside SDK result to the pending requests; its `state` is the request id.
  ///
  /// - Parameter result: The result.
  /// - Returns: Whether it completed a request.
  @discardableResult
  public func deliver(_ result: InsideResult) -> CallbackMatch {
    deliver(requestID: result.requestID, conflicting: false, outcome: result.outcome)
  }

  /// Reports a callback that could not be read.
  ///
  /// - Returns: The rejection.
  @discardableResult
  func rejectMalformed() -> CallbackMatch {
    reject(.malformed, requestID: nil)
  }

  private func deliver(
    requestID: String?, conflicting: Bool, outcome: Result<AuthCode, AuthCoordinatorError>
  ) -> CallbackMatch {
    let action = state.withLock {
      $0.deliver(requestID: requestID, conflicting: conflicting, outcome: outcome)
    }
    switch action {
    case .resume(let waiter, let outcome, let id, let timer):
      timer?.cancel()
      broadcaster.emit(.callbackMatched(requestID: id))
      waiter.resume(with: outcome.mapError { $0 })
      return .matched(requestID: id)
    case .kept(let id, let timer):
      timer?.cancel()
      broadcaster.emit(.callbackMatched(requestID: id))
      return .matched(requestID: id)
    case .reject(let reason, let id):
      return reject(reason, requestID: id)
    }
  }

  private func reject(_ reason: BridgeEvent.RejectReason, requestID: String?) -> CallbackMatch {
    let shown = requestID.map { SafepayCallback.clip($0) }
    broadcaster.emit(.callbackRejected(reason: reason, requestID: shown))
    return .rejected(reason: reason, requestID: shown)
  }

  /// Tells the provider the app became active (forward `applicationDidBecomeActive` or
  /// `sceneDidBecomeActive`).
  ///
  /// Every request whose URL was opened and that has no callback yet fails as abandoned unless
  /// its callback arrives within ``returnGracePeriod``. With nothing pending it does nothing.
  public func appDidBecomeActive() {
    state.withLock { machine in
      for (id, token) in machine.becameActive() {
        let timer = Task { [weak self, clock, returnGracePeriod] in
          do { try await clock.sleep(for: returnGracePeriod) } catch { return }
          self?.graceExpired(id, token: token)
        }
        if !machine.attach(id, token: token, timer: timer) { timer.cancel() }
      }
    }
  }

  /// Tells the provider the app resigned active (forward `applicationWillResignActive`):
  /// disarms the grace timers started by ``appDidBecomeActive()``.
  public func appWillResignActive() {
    for timer in state.withLock({ $0.resignedActive() }) { timer.cancel() }
  }

  private func graceExpired(_ id: String, token: UInt64) {
    switch state.withLock({ $0.graceExpired(id, token: token) }) {
    case .none:
      break
    case .abandon(let waiter, let id):
      broadcaster.emit(.abandonedAfterReturn(requestID: id))
      waiter.resume(throwing: Machine.abandonedError)
    case .abandonedBeforeParking(let id):
      broadcaster.emit(.abandonedAfterReturn(requestID: id))
    }
  }
}
