import AuthCoordinator
import Foundation

/// The timeline of `authcoord simulate --service`: the scenario's own lines always, and the
/// detail lines (the coordinator's events, the token server's answers) only while ``detailed``
/// is on, so that a hundred alike expiries do not print a hundred alike blocks.
///
/// It also records what the demo checks from the events (the loop guard's back-offs), whether
/// printed or not. No line ever carries a token value.
final class ServiceTimeline: @unchecked Sendable {
  let timeline: Timeline
  private let lock = NSLock()
  // Guarded by `lock`.
  private var showsDetail = true
  private var delays: [Duration] = []

  init(clock: VirtualClock, quiet: Bool) {
    timeline = Timeline(clock: clock, quiet: quiet)
  }

  /// The demo's wall-clock date (it moves with the virtual clock).
  var date: Date { timeline.date }

  /// Whether detail lines are printed.
  var detailed: Bool {
    get { lock.withLock { showsDetail } }
    set { lock.withLock { showsDetail = newValue } }
  }

  /// The delays of the loop guard's back-offs, in order.
  var backOffDelays: [Duration] { lock.withLock { delays } }

  /// A line of the scenario, stamped with the virtual time (wider than the Alipay demo's
  /// stamps: this run spans days).
  func log(_ message: String) {
    guard !timeline.quiet else { return }
    let stamp = String(format: "%10.3fs", timeline.seconds)
    lock.withLock { print("[\(stamp)] \(message)") }
  }

  /// A detail line: printed only while ``detailed`` is on.
  func detail(_ message: String) {
    if detailed { log(message) }
  }

  /// Prints the coordinator's `events` (subscribed by the caller, before the first request, so
  /// that none is missed) until cancelled.
  func follow(_ events: AsyncStream<AuthEvent>) -> Task<Void, Never> {
    Task {
      for await event in events {
        if case .refreshLoopBackedOff(_, let delay) = event {
          lock.withLock { delays.append(delay) }
        }
        Self.describe(event).map(detail)
      }
    }
  }

  /// The timeline's line for a coordinator event (events never carry a token).
  static func describe(_ event: AuthEvent) -> String? {
    switch event {
    case .flightStarted(let key, let flight):
      return "flight #\(flight) for \(key.account) started"
    case .authorizationStarted(let key, let flight, let reason):
      return
        "flight #\(flight): the authorizer asks the token endpoint for \(key.account) (\(reason))"
    case .flightSucceeded(_, let flight, let waiters):
      return "flight #\(flight) succeeded: \(waiters) waiting callers served"
    case .flightFailed(_, let flight, let code, _):
      return "flight #\(flight) failed: \(code)"
    case .flightTimedOut(_, let flight, let phase):
      return
        "flight #\(flight) ran past its deadline (\(phase.rawValue) phase): its callers get timed_out"
    case .flightCancelled(_, let flight, let reason):
      return "flight #\(flight) cancelled (\(reason.rawValue))"
    case .lateResultDiscarded(_, let flight):
      return "the late result of flight #\(flight) was discarded"
    case .lateResultSaved(_, let flight):
      return
        "the late result of flight #\(flight) was stored (never served to the callers that timed out)"
    case .adoptedFromStore(_, let flight):
      return "flight #\(flight) adopted the model the stopped refresh stored (no token request)"
    case .refreshLoopBackedOff(let key, let delay):
      return
        "loop guard: the next token request for \(key.account) waits \(ServiceSimulation.seconds(delay))"
    case .refreshLoopStopped(let key):
      return "loop guard: no further token request for \(key.account)"
    case .storeFailed(_, let operation, let message):
      return "store \(operation.rawValue) failed: \(message)"
    case .modelUnsaved(let key, _, _):
      return "the save for \(key.account) failed: the token stays in memory, the save is retried"
    case .refreshAbandoned(let key, _):
      return "a stopped token request for \(key.account) ran past the maximum hold: abandoned"
    case .refreshAheadStarted(let key, let flight):
      return
        "flight #\(flight): refreshing \(key.account) ahead of expiry; callers keep the cached token"
    case .retryScheduled(let key, let flight, let attempt, let delay, let code):
      return
        "flight #\(flight): \(code) for \(key.account); attempt \(attempt) after \(ServiceSimulation.seconds(delay))"
    case .staleServed(let key, let flight):
      return
        "flight #\(flight) failed: callers get \(key.account)'s cached token, not yet expired (stale-if-error)"
    case .cooldownEntered(let key, let code, let duration):
      return
        "\(key.account) remembers \(code) for \(ServiceSimulation.seconds(duration)): no token request meanwhile"
    case .serverClockOffsetUpdated(let offset):
      guard abs(offset.seconds) >= 1 else { return nil }
      return "the token server's clock is \(ServiceSimulation.seconds(offset)) off this one's"
    case .signOutRevocation(let key, .revoked):
      return "\(key.account)'s tokens revoked at the token server after its sign-out"
    case .signOutRevocation(let key, .failed(let code, _)):
      return "\(key.account)'s tokens not revoked after its sign-out: \(code)"
    case .signedOutElsewhere, .accountStatusChanged, .evicted, .saveRetryFailed,
      .unsavedModelSaved, .unsavedModelDropped, .leaseLost, .leaseHoldEnded:
      return nil
    }
  }
}
