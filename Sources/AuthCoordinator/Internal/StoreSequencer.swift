import SyncPrimitives

/// Orders store operations per key in the order the coordinator issued them, for the keys of
/// one stripe of the account table (all modes of a user share a stripe).
///
/// The coordinator reserves an operation's place synchronously (before any suspension) and gets back
/// what the operation must wait for and a latch to open when it is done; the flight's own task,
/// or the logout, then carries the operation out. Ordering per key is what makes a logout final:
/// a save's write issued before the logout completes before its removal starts (the grant
/// check after the write, and reads issued before, need not: a lease or a read that hangs must
/// not hold a logout back), and a load issued after it starts after the removal completed.
/// Removing a user's models is a barrier for every key of that user, in any mode (including
/// keys the coordinator never saw); a `removeAll` is a barrier for every key.
struct StoreSequencer {
  private var tails: [AccountKey: Latch] = [:]
  /// The latest write of each key, while its store work may be pending: what a removal waits
  /// for (a read issued before a removal may as well read after it: it finds less).
  private var writes: [AccountKey: Latch] = [:]
  /// The latest removal of each user's models, while it may still be pending.
  private var userBarriers: [String: Latch] = [:]
  private var barrier: Latch?
  /// An open latch that stands for a finished operation (``dropFinished(_:)``).
  private let finished: Latch = {
    let latch = Latch()
    latch.open()
    return latch
  }()

  /// The latches kept, per key and per user, not counting finished operations' entries (for
  /// ``AuthCoordinator/stateSizes``).
  var entryCount: Int {
    tails.values.count { !$0.isSame(as: finished) } + writes.count + userBarriers.count
  }

  /// Reserves the next operation for `key`.
  ///
  /// - Parameters:
  ///   - writes: The operation writes to the store (a save): a user's removal issued later
  ///     waits for its store work, not for the lease calls after it.
  ///   - leaseCallsFollow: Lease calls may follow the write (a coordinator with a lease): the
  ///     store work gets a latch of its own (``StoreTurn/storeWork``). Without them the write
  ///     ends with the operation, and its ``StoreTurn/done`` stands for both: one latch fewer
  ///     for every save of a coordinator without a lease.
  mutating func reserve(
    _ key: AccountKey, writes: Bool = false, leaseCallsFollow: Bool = true
  ) -> StoreTurn {
    if barrier?.isOpen == true { barrier = nil }
    let previous = tails[key].flatMap { $0.isOpen ? nil : $0 }
    let user = pendingUserBarrier(key.account)
    // Appended one by one: an array literal of the three would be allocated for every
    // operation, and there is usually nothing to wait for (an empty array allocates nothing).
    var after: [Latch] = []
    if let previous { after.append(previous) }
    if let user { after.append(user) }
    if let barrier { after.append(barrier) }
    let turn = StoreTurn(
      after: after, done: Latch(), storeWork: writes && leaseCallsFollow ? Latch() : nil)
    tails[key] = turn.done
    if writes { self.writes[key] = turn.storeWorkGate }
    return turn
  }

  /// Reserves an operation on every key of `account`: after the store work of every write
  /// issued so far for any of them (not the lease calls that may follow it, nor reads), and
  /// before every later operation.
  mutating func reserveUser(_ account: String) -> StoreTurn {
    if barrier?.isOpen == true { barrier = nil }
    var after: [Latch] = []
    for (key, latch) in writes where key.account == account {
      if !latch.isOpen { after.append(latch) }
      writes.removeValue(forKey: key)
    }
    for key in tails.keys where key.account == account { tails.removeValue(forKey: key) }
    if let user = pendingUserBarrier(account) { after.append(user) }
    if let barrier { after.append(barrier) }
    let latch = Latch()
    userBarriers[account] = latch
    return StoreTurn(after: after, done: latch)
  }

  /// Reserves an operation after every operation issued so far and before every later one.
  ///
  /// - Parameter latch: The latch the operation opens when done; one operation can be the
  ///   barrier of several sequencers (a `logoutAll` is one for every stripe of the table).
  mutating func reserveBarrier(done latch: Latch = Latch())
    -> StoreTurn
  {
    var after = writes.values.filter { !$0.isOpen }
    after += userBarriers.values.filter { !$0.isOpen }
    if let barrier, !barrier.isOpen { after.append(barrier) }
    tails.removeAll()
    writes.removeAll()
    userBarriers.removeAll()
    barrier = latch
    return StoreTurn(after: after, done: latch)
  }

  /// Lets `key`'s last operation go if it is done: nothing issued later needs to wait for it.
  /// Its entry stays, holding ``finished``, so the key's next operation replaces a value
  /// instead of inserting a key again: one hash of the key here, none more later.
  mutating func dropFinished(_ key: AccountKey) {
    if let index = tails.index(forKey: key), tails.values[index].isOpen {
      tails.values[index] = finished
    }
  }

  /// Forgets `key`'s finished operations, so that idle and evicted keys cost nothing here.
  mutating func forget(_ key: AccountKey) {
    if tails[key]?.isOpen == true { tails.removeValue(forKey: key) }
    if writes[key]?.isOpen == true { writes.removeValue(forKey: key) }
    _ = pendingUserBarrier(key.account)
  }

  /// The user's removal if it has not finished; forgets it once it has.
  private mutating func pendingUserBarrier(_ account: String) -> Latch? {
    guard let latch = userBarriers[account] else { return nil }
    if latch.isOpen {
      userBarriers.removeValue(forKey: account)
      return nil
    }
    return latch
  }
}

/// One store operation's place in line: wait for `after`, do the operation, open `done`
/// (``finish()``).
struct StoreTurn: Sendable {
  let after: [Latch]
  let done: Latch
  /// A write's: opens when its store work is done, before the lease call that follows it (the
  /// save's grant check); `nil` for any other operation. A user's removal waits for this, not
  /// for ``done``, and for no read: a lease or a read that hangs holds back no logout (fleet
  /// simulation, seed 0x855). Later operations of the key still wait for ``done``: until the
  /// save's outcome reaches the state machine, memory may prefer its model to the store's
  /// (rule 21), and a read must not see a newer stored one meanwhile.
  let storeWork: Latch?

  init(after: [Latch], done: Latch, storeWork: Latch? = nil) {
    self.after = after
    self.done = done
    self.storeWork = storeWork
  }

  /// What a user's removal waits for.
  var storeWorkGate: Latch { storeWork ?? done }

  /// Waits until every earlier operation finished.
  ///
  /// Inlined: a turn with nothing to wait for (the usual case) then makes no async call, whose
  /// frame could cost the task a new allocation block at the end of a deep chain of frames.
  @inline(__always)
  func waitForTurn() async {
    if !after.isEmpty { await waitForEarlierOperations() }
  }

  @inline(never)
  private func waitForEarlierOperations() async {
    for latch in after { await latch.wait() }
  }

  /// The store work is done; lease calls may follow.
  func storeWorkFinished() { storeWork?.open() }

  /// The operation is done, lease calls included.
  func finish() {
    storeWork?.open()
    done.open()
  }
}
