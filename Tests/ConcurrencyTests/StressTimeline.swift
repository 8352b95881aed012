import Foundation
import SyncPrimitives

/// What the stress's fakes and driver did on each account, in one order, as it happened: a
/// diagnosis of a violation (`STRESS_EVENTS=1`). The store's operations, the authorizer's
/// calls and what they issued, the lease's answers, the calls' beginnings and ends, the
/// logouts: each is noted synchronously by whoever did it, under one lock, so the order is
/// the real one (the coordinator's events, which reach a subscriber late, are printed apart:
/// ``EventTrail``). Off unless a run turns it on; one run at a time in a process.
final class StressTimeline: Sendable {
  static let shared = StressTimeline()
  static let kept = 120

  private struct State {
    var next = 0
    var lines: [String: [String]] = [:]
  }

  private let state = LockedState(State())
  /// Odd while on: read without the lock, so that a run with the timeline off takes no lock
  /// of it (a lock shared by every fake would order their threads).
  private let switches = AtomicCounter()

  private var enabled: Bool { switches.value & 1 == 1 }

  /// Turns it on, empty (the driver's thread only).
  func enable() {
    state.withLock { $0 = State() }
    if !enabled { _ = switches.next() }
  }

  func disable() {
    if enabled { _ = switches.next() }
  }

  /// Notes `what` on `account` ("*" for every account).
  func note(_ account: String, _ what: @autoclosure () -> String) {
    guard enabled else { return }
    // Made outside the lock: it may take the caller's fakes' locks (no order between them).
    let text = what()
    state.withLock { state in
      state.next += 1
      state.lines[account, default: []].append("t\(state.next) \(text)")
      if state.lines[account]!.count > Self.kept { state.lines[account]!.removeFirst() }
    }
  }

  /// The last lines of `account` and of every account, in order.
  func lines(of account: String) -> [String] {
    func number(_ line: String) -> Int { Int(line.dropFirst().prefix { $0 != " " }) ?? 0 }
    let lines = state.withLock { ($0.lines[account] ?? []) + ($0.lines["*"] ?? []).suffix(20) }
    return lines.sorted { number($0) < number($1) }
  }
}
