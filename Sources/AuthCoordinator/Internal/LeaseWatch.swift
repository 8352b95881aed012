import SyncPrimitives

/// Counts the changes the cross-process lease announced, and wakes the flights waiting for
/// another process's result. A flight reads ``version`` before it tries the lease; if the
/// lease is held, it waits for a later version, so a release announced between its attempt
/// and its wait is never missed.
final class LeaseWatch: Sendable {
  private struct State {
    var version: UInt64 = 0
    /// Registered waiters: `nil` until parked. A waiter whose entry is gone was woken.
    var waiters: [UInt64: CheckedContinuation<Void, Never>?] = [:]
    var nextWaiter: UInt64 = 0
  }

  private let state = LockedState(State())

  /// The number of changes announced so far.
  var version: UInt64 { state.withLock { $0.version } }

  /// A change was announced: every waiter resumes.
  func changed() {
    let waiters = state.withLock { state in
      state.version += 1
      defer { state.waiters.removeAll() }
      // In the order they started waiting (a dictionary's order varies from run to run).
      return state.waiters.sorted { $0.key < $1.key }.compactMap { $0.value }
    }
    for waiter in waiters { waiter.resume() }
  }

  /// Returns once a change after `seen` was announced, `deadline` passed on `clock`, or the
  /// task was cancelled.
  func wait(after seen: UInt64, until deadline: Duration, on clock: CoordinatorClock) async {
    let id = state.withLock { state -> UInt64? in
      guard state.version == seen else { return nil }
      defer { state.nextWaiter += 1 }
      state.waiters[state.nextWaiter] = .some(nil)
      return state.nextWaiter
    }
    guard let id else { return }
    let timer = Task { [weak self] in
      try? await clock.sleepUntil(deadline)
      self?.wake(id)
    }
    await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        let parked = state.withLock { state -> Bool in
          // Gone: a change, the deadline or a cancellation came first.
          guard state.waiters[id] != nil, !Task.isCancelled else { return false }
          state.waiters[id] = continuation
          return true
        }
        if !parked { continuation.resume() }
      }
    } onCancel: {
      wake(id)
    }
    timer.cancel()
  }

  /// Wakes one waiter (its deadline passed, or its task was cancelled).
  private func wake(_ id: UInt64) {
    let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
    waiter??.resume()
  }
}
