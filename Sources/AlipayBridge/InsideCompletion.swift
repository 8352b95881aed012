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
