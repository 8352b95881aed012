import Foundation
import SyncPrimitives

// The account table: the hot cache mirror, least-recently-used eviction, store reports.
extension AuthCoordinator {
  func reportStoreFailure(
    _ key: AccountKey?, _ operation: AuthEvent.StoreOperation, _ error: any Error
  ) {
    counters.update { $0.storeFailures += 1 }
    broadcaster.emit(.storeFailed(key: key, operation: operation, message: "\(error)"))
  }

  func syncHotCache(_ key: AccountKey) {
    guard let machine = accounts[key]?.machine else { return hot.set(nil, for: key) }
    hot.set(machine.cachedModel, leeway: machine.cacheLeeway, for: key)
  }

  /// How long one store operation may take before the coordinator stops waiting for it: the
  /// configured store timeout, and never longer than the authorization timeout.
  var storeTimeout: Duration {
    min(configuration.storeTimeout, configuration.authorizationTimeout)
  }

  /// Evicts the least recently used idle keys beyond ``Configuration/maxIdleKeys``.
  func evictIfNeeded() {
    let idle = accounts.count - flights.count
    let limit = max(configuration.maxIdleKeys, 0)
    guard idle > limit else { return }
    // Evict a little more than needed so a steady stream of new keys costs amortised O(1).
    let count = idle - limit + limit / 16
    var candidates: [(key: AccountKey, lastUsed: UInt64)] = []
    candidates.reserveCapacity(idle)
    let now = clock.now()
    for (key, account) in accounts where account.machine.isEvictable(now: now) {
      candidates.append((key, max(account.lastUsed, hot.lastUsed(key) ?? 0)))
    }
    candidates.sort { $0.lastUsed < $1.lastUsed }
    for candidate in candidates.prefix(count) {
      accounts.removeValue(forKey: candidate.key)
      hot.remove(candidate.key)
      storeOperations.forget(candidate.key)
      broadcaster.emit(.evicted(key: candidate.key))
    }
    counters.update {
      $0.evictions += min(count, candidates.count)
      $0.keysInMemory = accounts.count
    }
  }

  static func wrap(_ error: any Error) -> AuthCoordinatorError {
    if let error = error as? AuthCoordinatorError { return error }
    if error is CancellationError {
      return AuthCoordinatorError(
        .authorizationFailed, "the authorizer was cancelled", underlying: error)
    }
    return AuthCoordinatorError(.authorizationFailed, "the authorizer failed", underlying: error)
  }
}
