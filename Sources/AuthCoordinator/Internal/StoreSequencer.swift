import SyncPrimitives

/// Orders store operations per key in the order the coordinator issued them, for the keys of
/// one stripe of the account table (all modes of a user share a stripe).
///
/// The coordinator reserves an operation's place synchronously (before any suspension) and gets back
/// what the operation must wait for and a latch to open when it is done; the flight's own task,
/// or the logout, then carries the operation out. Ordering per key is what makes a logout final:
/// a save issued before the logout completes before its removal starts, and a load issued after
/// it starts after the removal completed. Removing a user's models is a barrier for every key
/// of that user, in any mode (including keys the coordinator never saw); a `removeAll` is a
/// barrier for every key.
struct StoreSequencer {
  private var tails: [AccountKey: Latch] = [:]
  /// The latest removal of each user's models, while it may still be pending.
  private var userBarriers: [String: Latch] = [:]
  private var barrier: Latch?

  /// Reserves the next operation for `key`.
  mutating func reserve(_ key: AccountKey) -> StoreTurn {
    if barrier?.isOpen == true { barrier = nil }
    let previous = tails[key].flatMap { $0.isOpen ? nil : $0 }
    let user = pendingUserBarrier(key.account)
    let latch = Latch()
    tails[key] = latch
    return StoreTurn(after: [previous, user, barrier].compactMap { $0 }, done: latch)
  }

  /// Reserves an operation on every key of `account`: after every operation issued so far for
  /// any of them, and before every later one.
  mutating func reserveUser(_ account: String) -> StoreTurn {
    if barrier?.isOpen == true { barrier = nil }
    var after: [Latch] = []
    for (key, latch) in tails where key.account == account {
      if !latch.isOpen { after.append(latch) }
      tails.removeValue(forKey: key)
    }
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
    var after = tails.values.filter { !$0.isOpen }
    after += userBarriers.values.filter { !$0.isOpen }
    if let barrier, !barrier.isOpen { after.append(barrier) }
    tails.removeAll()
    userBarriers.removeAll()
    barrier = latch
    return StoreTurn(after: after, done: latch)
  }

  /// Forgets `key`'s finished operations, so that idle and evicted keys cost nothing here.
  mutating func forget(_ key: AccountKey) {
    if tails[key]?.isOpen == true { tails.removeValue(forKey: key) }
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

/// One store operation's place in line: wait for `after`, do the operation, open `done`.
struct StoreTurn: Sendable {
  let after: [Latch]
  let done: Latch

  /// Waits until every earlier operation finished.
  func waitForTurn() async {
    for latch in after { await latch.wait() }
  }
}
