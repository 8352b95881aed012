import SyncPrimitives

/// Opens once; whoever waits for it resumes then. A store operation opens one when it finished
/// (later operations wait for it), and a stopped flight when its work was cancelled (the key's
/// next flight waits for it).
///
/// Copies share one latch: its state and lock are one allocation (a flight makes a few per
/// store operation, so a class around them would double that).
struct Latch: Sendable {
  private let state: LockedState<(open: Bool, waiters: [@Sendable () -> Void])>

  init() { state = LockedState((false, [])) }

  var isOpen: Bool { state.withLock { $0.open } }

  /// Whether `other` is a copy of this latch, not one made apart (for tests).
  func isSame(as other: Latch) -> Bool { state.isSame(as: other.state) }

  func wait() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      whenOpen { continuation.resume() }
    }
  }

  /// Waits until the latch opens or `deadline` passes on `clock`.
  ///
  /// - Returns: `true` when the latch opened, `false` when the deadline came first.
  func wait(until deadline: Duration, on clock: CoordinatorClock) async -> Bool {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
      let pending = LockedState<CheckedContinuation<Bool, Never>?>(continuation)
      let timer = Task {
        do { try await clock.sleepUntil(deadline) } catch { return }
        pending.withLock { $0.take() }?.resume(returning: false)
      }
      whenOpen {
        timer.cancel()
        pending.withLock { $0.take() }?.resume(returning: true)
      }
    }
  }

  func open() {
    let waiters = state.withLock { state -> [@Sendable () -> Void] in
      state.open = true
      defer { state.waiters.removeAll() }
      return state.waiters
    }
    for waiter in waiters { waiter() }
  }

  /// Runs `action` when the latch opens, or at once if it is open.
  private func whenOpen(_ action: @escaping @Sendable () -> Void) {
    let open = state.withLock { state -> Bool in
      if state.open { return true }
      state.waiters.append(action)
      return false
    }
    if open { action() }
  }
}
