import Foundation
import SyncPrimitives

/// The faults of a shared-lease stress run, drawn from their own seeded stream (so that the
/// driver's script does not depend on how often they are asked), and the simulated host's wall
/// clock, which a fault steps.
///
/// - 5% of saves throw before writing; the model is served, kept unsaved and retried.
/// - 5% of lease renewals throw; the holder retries until its grant would lapse.
/// - 2% of authorizer calls hang past the maximum hold, ignoring cancellation, and then fail
///   without reaching the server; the hold ends and the next flight authorizes.
/// - The driver steps the wall clock (``stepWallClock(by:)``): every process's `now` moves; the
///   lease's expiries stay on the real clock, as a lease on a clock that never steps keeps them.
final class SharedStressFaults: Sendable {
  enum Kind: String, Sendable, CaseIterable {
    case saves, renewals, hangs, clock
  }

  struct Counts: Sendable {
    var failedSaves = 0
    var failedRenewals = 0
    var hungCalls = 0
    var clockSteps = 0
    var offset: TimeInterval = 0
  }

  private struct State {
    var rng: SplitMix64
    var counts = Counts()
  }

  let kinds: Set<Kind>
  private let state: LockedState<State>

  init(kinds: Set<Kind>, seed: UInt64) {
    self.kinds = kinds
    state = LockedState(State(rng: SplitMix64(seed: SplitMix64.hash(seed, 3))))
  }

  var counts: Counts { state.withLock { $0.counts } }

  /// The wall clock every simulated process reads.
  var wallClock: @Sendable () -> Date {
    { [state] in Date().addingTimeInterval(state.withLock { $0.counts.offset }) }
  }

  func stepWallClock(by seconds: TimeInterval) {
    guard kinds.contains(.clock) else { return }
    state.withLock {
      $0.counts.offset += seconds
      $0.counts.clockSteps += 1
    }
  }

  func saveFails() -> Bool { draw(.saves, 5, \.failedSaves) }
  func renewalFails() -> Bool { draw(.renewals, 5, \.failedRenewals) }
  func callHangs() -> Bool { draw(.hangs, 2, \.hungCalls) }

  private func draw(
    _ kind: Kind, _ percent: Double, _ counter: WritableKeyPath<Counts, Int>
  ) -> Bool {
    guard kinds.contains(kind) else { return false }
    return state.withLock { state in
      guard state.rng.chance(percent) else { return false }
      state.counts[keyPath: counter] += 1
      return true
    }
  }
}
