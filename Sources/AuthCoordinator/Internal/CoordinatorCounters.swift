import SyncPrimitives

/// The coordinator's counters, readable from any thread.
///
/// One per stripe of the account table, under a lock of its own: the flights' queues update the
/// waiting-caller counts outside the stripe's lock. Cache hits are counted under the stripe's
/// lock, which the hit already holds.
final class CoordinatorCounters: Sendable {
  private let state = LockedState(AuthCoordinator.Statistics())

  func update(_ body: (inout AuthCoordinator.Statistics) -> Void) {
    state.withLock { body(&$0) }
  }

  var snapshot: AuthCoordinator.Statistics { state.withLock { $0 } }

  func waiterArrived(coalesced: Bool) {
    state.withLock {
      $0.waitingCallers += 1
      if coalesced { $0.coalescedCallers += 1 }
    }
  }

  func waiterLeftEarly() {
    state.withLock {
      $0.waitingCallers -= 1
      $0.callersLeftEarly += 1
    }
  }

  func waitersResumed(_ count: Int) {
    guard count > 0 else { return }
    state.withLock { $0.waitingCallers -= count }
  }
}
