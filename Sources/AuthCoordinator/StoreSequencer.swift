import SyncPrimitives

/// Orders store operations per key in the order the actor issued them.
///
/// The actor reserves an operation's place synchronously (before any suspension) and gets back
/// what the operation must wait for and a latch to open when it is done; the flight's own task,
/// or the logout, then carries the operation out. Ordering per key is what makes a logout final:
/// a save issued before the logout completes before its removal starts, and a load issued after
/// it starts after the removal completed. A `removeAll` is a barrier after every earlier
/// operation and before every later one.
struct StoreSequencer {
  private var tails: [AccountKey: StoreOperationLatch] = [:]
  private var barrier: StoreOperationLatch?

  /// Reserves the next operation for `key`.
  mutating func reserve(_ key: AccountKey) -> StoreTurn {
    if barrier?.isOpen == true { barrier = nil }
    let previous = tails[key].flatMap { $0.isOpen ? nil : $0 }
    let latch = StoreOperationLatch()
    tails[key] = latch
    return StoreTurn(after: [previous, barrier].compactMap { $0 }, done: latch)
  }

  /// Reserves an operation after every operation issued so far and before every later one.
  mutating func reserveBarrier() -> StoreTurn {
    var after = tails.values.filter { !$0.isOpen }
    if let barrier, !barrier.isOpen { after.append(barrier) }
    let latch = StoreOperationLatch()
    tails.removeAll()
    barrier = latch
    return StoreTurn(after: after, done: latch)
  }

  /// Forgets `key`'s finished operations, so that idle and evicted keys cost nothing here.
  mutating func forget(_ key: AccountKey) {
    if tails[key]?.isOpen == true { tails.removeValue(forKey: key) }
  }
}

/// One store operation's place in line: wait for `after`, do the operation, open `done`.
struct StoreTurn: Sendable {
  let after: [StoreOperationLatch]
  let done: StoreOperationLatch

  /// Waits until every earlier operation finished.
  func waitForTurn() async {
    for latch in after { await latch.wait() }
  }
}

/// Opens once, when a store operation finished; later operations wait for it.
final class StoreOperationLatch: Sendable {
  private let state = LockedState<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>(
    (false, []))

  var isOpen: Bool { state.withLock { $0.open } }

  func wait() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let open = state.withLock { state -> Bool in
        if state.open { return true }
        state.waiters.append(continuation)
        return false
      }
      if open { continuation.resume() }
    }
  }

  func open() {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.open = true
      defer { state.waiters.removeAll() }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }
}
