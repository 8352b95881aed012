import Foundation

// What the coordinator keeps, counted for the fleet simulation's check that nothing grows
// without bound while faults storm (the end of a seed checks what is left; this checks the
// way there).
extension AuthCoordinator {
  /// The sizes of what the coordinator keeps: over the whole table, and the largest of each
  /// record any one key keeps.
  package struct StateSizes: Sendable, Equatable {
    /// Keys in memory.
    package var keys = 0
    /// Flights in progress (one per key at most).
    package var flights = 0
    /// Deadlines armed in the stripes' heaps, including those of ended flights not yet pruned.
    package var deadlines = 0
    /// Entries of the stripes' store order (latches per key and per user).
    package var storeOrder = 0
    /// Users whose logout did not reach the store.
    package var unremovedUsers = 0
    /// The largest record of one key, by name: stopped flights, save retries, saves past
    /// their deadline, loop-guard starts, refused and replaced refresh tokens.
    package var perKey: [String: Int] = [:]
  }

  /// A snapshot of ``StateSizes``, each stripe read under its lock.
  package var stateSizes: StateSizes {
    var sizes = StateSizes()
    for stripe in table.stripes {
      stripe.lock.withLockToRead {
        sizes.keys += stripe.accounts.count
        sizes.deadlines += stripe.deadlines.count
        sizes.storeOrder += stripe.storeOperations.entryCount
        sizes.unremovedUsers += stripe.unremoved.count
        for slot in stripe.accounts.values {
          let machine = slot.machine
          if machine.flightID != nil { sizes.flights += 1 }
          for (name, count) in [
            ("stopped flights", machine.stopped.count),
            ("save retries", machine.saveRetries.count),
            ("saves past their deadline", machine.savesPastDeadline.count),
            ("loop-guard starts", machine.loopGuardStarts.count),
            ("refused refresh tokens", machine.refusedRefreshTokens.count),
            ("replaced refresh tokens", machine.replacedRefreshTokens.count),
          ] {
            sizes.perKey[name] = max(sizes.perKey[name] ?? 0, count)
          }
        }
      }
    }
    return sizes
  }
}
