import AuthCoordinator
import Dispatch
import Foundation

/// Monotonic nanoseconds.
@inline(__always) func nowNanos() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

/// Holds the authorizer until the harness opens it: B2-B4 release it only once every caller has
/// been spawned and has parked, so the measured window (release to last result) contains the
/// wake-up and nothing else.
final class Gate: Sendable {
  private struct State {
    var isOpen = false
    var waiters: [UnsafeContinuation<Void, Never>] = []
    var arrivals = 0
  }

  private let state = LockedState(State())

  /// Calls that reached the gate.
  var arrivals: Int { state.withLock { $0.arrivals } }

  func wait() async {
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let passes = state.withLock { state -> Bool in
        state.arrivals += 1
        if state.isOpen { return true }
        state.waiters.append(continuation)
        return false
      }
      if passes { continuation.resume() }
    }
  }

  func open() {
    let waiters = state.withLock { state -> [UnsafeContinuation<Void, Never>] in
      state.isOpen = true
      defer { state.waiters = [] }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}

/// The authorizer every implementation calls: counts calls, optionally waits at a gate or for
/// a fixed delay, and returns a model carrying `freshToken` (compared, never printed).
final class AuthorizerFixture: Sendable {
  let gate: Gate?
  let delay: Duration?
  let freshToken = "fresh-" + UUID().uuidString
  private let calls = LockedState(0)
  private let now: @Sendable () -> Date

  init(gate: Gate?, delay: Duration? = nil, now: @escaping @Sendable () -> Date) {
    self.gate = gate
    self.delay = delay
    self.now = now
  }

  /// Calls into the authorizer so far.
  var authorizations: Int { calls.withLock { $0 } }

  func authorize(_ key: AccountKey) async throws -> AuthModel {
    let call = calls.withLock { calls -> Int in
      calls += 1
      return calls
    }
    if let gate { await gate.wait() }
    if let delay { try await Task.sleep(for: delay) }
    return AuthModel(
      uid: "2088\(call)", accessToken: freshToken, mcUid: key.account,
      expiresAt: now().addingTimeInterval(7200))
  }

  /// Whether `model` is the one this fixture produced for `key`.
  func isFresh(_ model: AuthModel, for key: AccountKey) -> Bool {
    model.accessToken == freshToken && model.account == key.account
  }
}

/// A wall clock the harness can move forward, so a cached model expires without sleeping.
final class TimeTravel: Sendable {
  private let offset = LockedState<TimeInterval>(0)

  func now() -> Date { Date().addingTimeInterval(offset.withLock { $0 }) }

  func advance(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }
}

/// A locked counter.
final class Counter: Sendable {
  private let value = LockedState(0)

  func increment() { value.withLock { $0 += 1 } }

  var count: Int { value.withLock { $0 } }
}

/// Counts the outcomes of a group of callers and timestamps the last one.
final class Tally: Sendable {
  enum Outcome {
    case served, wrongModel, cancelled, failed
  }

  struct Counts: Sendable {
    var remaining: Int
    var served = 0
    var wrongModel = 0
    var cancelled = 0
    var failed = 0
    var lastNanos: UInt64 = 0
  }

  private let state: LockedState<Counts>

  init(expected: Int) { state = LockedState(Counts(remaining: expected)) }

  var counts: Counts { state.withLock { $0 } }

  func record(_ outcome: Outcome) {
    let last = state.withLock { state -> Bool in
      switch outcome {
      case .served: state.served += 1
      case .wrongModel: state.wrongModel += 1
      case .cancelled: state.cancelled += 1
      case .failed: state.failed += 1
      }
      state.remaining -= 1
      return state.remaining == 0
    }
    if last {
      let time = nowNanos()
      state.withLock { $0.lastNanos = time }
    }
  }

  /// Whether every caller has finished and the last one has been timestamped.
  var isDone: Bool { state.withLock { $0.remaining <= 0 && $0.lastNanos != 0 } }
}

/// Polls `condition` every millisecond until it holds or `timeout` passes.
func waitUntil(timeout: Duration = .seconds(120), _ condition: () -> Bool) async -> Bool {
  let deadline = ContinuousClock.now.advanced(by: timeout)
  while !condition() {
    if ContinuousClock.now > deadline { return false }
    try? await Task.sleep(for: .milliseconds(1))
  }
  return true
}

/// The harness could not run a scenario to the end (callers never parked or never finished).
struct HarnessFailure: Error, CustomStringConvertible {
  var description: String
}
