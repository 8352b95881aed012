import Foundation
import SyncPrimitives

// Bounded memory: idle keys beyond the limit are forgotten, least recently used first, across
// every stripe of the table.
extension AuthCoordinator {
  /// Evicts the least recently used idle keys beyond ``Configuration/maxIdleKeys``.
  ///
  /// Cheap when nothing is to evict (four atomic loads). Otherwise it visits every stripe
  /// twice, each under its own lock: once to count idle keys and collect the evictable ones
  /// with their recency, once to remove the oldest (each re-checked, since a request may have
  /// used it meanwhile). It evicts a little more than needed, so a steady stream of new keys
  /// costs amortised O(1). One eviction runs at a time.
  func evictIfNeeded() {
    let limit = max(configuration.maxIdleKeys, 0)
    guard table.idleEstimate > limit else { return }
    table.evictionLock.lock()
    defer { table.evictionLock.unlock() }

    var idle = 0
    var candidates: [(key: AccountKey, lastUsed: UInt64, stripe: Stripe)] = []
    let now = clock.now()
    for stripe in table.stripes {
      // Reading only: the threads' replicas of the stripe's models stay current.
      stripe.lock.withLockToRead {
        for (key, slot) in stripe.accounts {
          if slot.machine.flightID == nil { idle += 1 }
          if slot.machine.isEvictable(now: now) { candidates.append((key, slot.lastUsed, stripe)) }
        }
      }
    }
    guard idle > limit else { return }
    let count = idle - limit + limit / 16
    candidates.sort { $0.lastUsed < $1.lastUsed }

    var evicted: [AccountKey] = []
    for candidate in candidates.prefix(count) {
      let stripe = candidate.stripe
      let removed: Bool = stripe.lock.withLock {
        guard let slot = stripe.accounts[candidate.key], slot.lastUsed == candidate.lastUsed,
          slot.machine.isEvictable(now: now)
        else { return false }
        stripe.accounts.removeValue(forKey: candidate.key)
        stripe.memo = nil
        stripe.storeOperations.forget(candidate.key)
        stripe.counters.update { $0.evictions += 1 }
        return true
      }
      if removed { evicted.append(candidate.key) }
    }
    table.evicted.add(UInt64(evicted.count))
    for key in evicted { broadcaster.emit(.evicted(key: key)) }
  }
}
