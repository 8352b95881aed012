import Foundation
import SyncPrimitives
import Testing

/// `ThreadSlot`, which holds each thread's replicas of the models it served: one object per
/// thread, released when the thread exits. Run on threads of their own, never on the pool's,
/// whose slot holds the coordinator's replicas.
@Suite struct ThreadSlotTests {
  final class Probe: Sendable {
    let released: @Sendable () -> Void
    init(released: @escaping @Sendable () -> Void) { self.released = released }
    deinit { released() }
  }

  @Test func aThreadsObjectIsItsOwnAndIsReleasedWhenTheThreadExits() {
    let seen = LockedState<[String]>([])
    let released = DispatchSemaphore(value: 0)
    let thread = Thread {
      seen.withLock { $0.append("empty before: \(ThreadSlot<Probe>.current == nil)") }
      let probe = Probe { released.signal() }
      ThreadSlot<Probe>.install(probe)
      seen.withLock { $0.append("installed: \(ThreadSlot<Probe>.current === probe)") }
      let other = Thread {
        seen.withLock { $0.append("other thread empty: \(ThreadSlot<Probe>.current == nil)") }
      }
      other.start()
      while seen.withLock({ $0.count }) < 3 { sched_yield() }
    }
    thread.start()
    // Signalled by the probe's deinit, when the thread's exit releases it; the limit is a
    // watchdog for a release that never comes, not a wait for it.
    #expect(released.wait(timeout: .now() + 30) == .success, "released when its thread exited")
    #expect(
      seen.withLock { $0 }
        == ["empty before: true", "installed: true", "other thread empty: true"])
  }
}
