import SyncPrimitives

/// One task sleeping on the injected clock until the earliest deadline any stripe asked for.
///
/// Each stripe keeps its own heap of deadlines and asks to be woken only when a new deadline is
/// earlier than anything it asked for before, so arming a deadline rarely reaches this shared
/// lock (deadlines are mostly armed in increasing order). When the sleeper fires, every stripe
/// pops what is due and asks again for its next deadline. Waking too early is harmless; every
/// request is honoured by a sleeper that fires at or before it.
final class DeadlineScheduler: Sendable {
  private struct State {
    var wakeAt: Duration?
    var generation: UInt64 = 0
    var sleeper: Task<Void, Never>?
  }

  private let state = LockedState(State())
  private let clock: CoordinatorClock
  private let onDue: @Sendable () -> Void

  /// - Parameter onDue: Called from the sleeper's task when it fires.
  init(clock: CoordinatorClock, onDue: @escaping @Sendable () -> Void) {
    self.clock = clock
    self.onDue = onDue
  }

  /// Makes sure the sleeper fires at or before `deadline`.
  func wake(by deadline: Duration) {
    state.withLock { state in
      if let wakeAt = state.wakeAt, wakeAt <= deadline { return }
      state.sleeper?.cancel()
      state.generation += 1
      let generation = state.generation
      let clock = self.clock
      state.wakeAt = deadline
      state.sleeper = Task { [weak self] in
        do { try await clock.sleepUntil(deadline) } catch { return }
        self?.fired(generation)
      }
    }
  }

  private func fired(_ generation: UInt64) {
    state.withLock { state in
      guard state.generation == generation else { return }
      state.wakeAt = nil
      state.sleeper = nil
    }
    onDue()
  }

  /// Stops the sleeper (the coordinator is going away).
  func cancel() {
    state.withLock { state in
      state.sleeper?.cancel()
      state.sleeper = nil
      state.wakeAt = nil
    }
  }
}
