/// Runs store operations for one key in the order the actor issued them.
///
/// The coordinator never awaits the store while holding a decision open: it enqueues the
/// operation here and handles the result as a new event. Ordering per key is what makes a logout
/// final: a save issued before the logout runs before its removal, and a load issued after it runs
/// after. `removeAll` is a barrier that waits for every earlier operation and precedes every later
/// one.
struct StoreSequencer {
  private var tails: [AccountKey: (sequence: UInt64, task: Task<Void, Never>)] = [:]
  private var barrier: Task<Void, Never>?
  private var sequence: UInt64 = 0

  /// Enqueues `operation` for `key`.
  ///
  /// - Parameter operation: The work; it receives its sequence number, to pass to
  ///   ``finished(_:sequence:)`` when done.
  /// - Returns: The task running it.
  mutating func enqueue(
    _ key: AccountKey, _ operation: @escaping @Sendable (_ sequence: UInt64) async -> Void
  ) -> Task<Void, Never> {
    sequence += 1
    let current = sequence
    let previous = tails[key]?.task
    let barrier = self.barrier
    let task = Task {
      await barrier?.value
      await previous?.value
      await operation(current)
    }
    tails[key] = (current, task)
    return task
  }

  /// Enqueues `operation` after every operation issued so far, and before every later one.
  mutating func enqueueBarrier(_ operation: @escaping @Sendable () async -> Void) -> Task<
    Void, Never
  > {
    let previous = tails.values.map(\.task) + (barrier.map { [$0] } ?? [])
    let task = Task {
      for earlier in previous { await earlier.value }
      await operation()
    }
    tails.removeAll()
    barrier = task
    return task
  }

  /// Forgets a finished operation so idle keys cost no memory here.
  mutating func finished(_ key: AccountKey, sequence: UInt64) {
    if tails[key]?.sequence == sequence { tails.removeValue(forKey: key) }
  }

  /// The number of keys with an operation not yet forgotten.
  var pendingKeys: Int { tails.count }
}
