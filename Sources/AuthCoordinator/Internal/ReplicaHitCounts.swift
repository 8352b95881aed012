import SyncPrimitives

/// A coordinator's cache hits served from threads' replicas (``HitReplicas``): one counter per
/// thread that served any, which only that thread writes, summed when the statistics are read.
///
/// A thread that stops serving the coordinator's keys (it exits, or its replicas make room for
/// another coordinator's) retires its counter: the count moves into `retired`, under the lock,
/// after the thread's last write to it.
final class ReplicaHitCounts: Sendable {
  private let state = LockedState<(retired: UInt64, live: [AtomicCounter])>((0, []))

  /// A new counter for the calling thread.
  func register() -> AtomicCounter {
    let counter = AtomicCounter()
    state.withLock { $0.live.append(counter) }
    return counter
  }

  /// Called by the thread that owns `counter` when it will never write it again.
  func retire(_ counter: AtomicCounter) {
    state.withLock { state in
      guard let index = state.live.firstIndex(where: { $0 === counter }) else { return }
      state.retired &+= counter.value
      state.live.remove(at: index)
    }
  }

  /// Every hit served from a replica so far (exact once the hits being served have returned).
  var total: UInt64 {
    state.withLock { state in state.live.reduce(state.retired) { $0 &+ $1.value } }
  }
}
