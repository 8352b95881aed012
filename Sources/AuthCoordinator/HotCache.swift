import Foundation
import SyncPrimitives

/// The lock-protected mirror of every valid cached model: the cache-hit path.
///
/// The actor owns the truth (``AccountStateMachine``) and writes here whenever a key's cached
/// model changes; ``AuthCoordinator/authModel(for:refresh:timeout:)`` reads here without entering
/// the actor, so a hit costs one lock and one dictionary lookup. It also keeps the recency ticks
/// the least-recently-used eviction orders keys by, and counts hits.
final class HotCache: @unchecked Sendable {
  private struct Entry {
    var model: AuthModel
    /// `expiresAt - refreshLeeway` as seconds since the reference date; `.infinity` without expiry.
    var freshUntil: Double
    var lastUsed: UInt64
  }

  private let lock = Lock()
  private var entries: [AccountKey: Entry] = [:]
  /// The last key hit and its position: a hit on the same key skips hashing it (most traffic is
  /// one user's). Cleared by every change of `entries`' structure.
  private var memo: (key: AccountKey, index: [AccountKey: Entry].Index)?
  private var tick: UInt64 = 0
  private var hits = 0
  private let leeway: Double
  private let now: @Sendable () -> Date

  init(leeway: Duration, now: @escaping @Sendable () -> Date) {
    self.leeway = leeway.seconds
    self.now = now
  }

  /// The model for `key` if it is cached and valid now.
  ///
  /// Out of line on purpose: inlined into the async `authModel`, its temporaries (the hasher,
  /// the entry copy) became part of every caller's async frame, parked callers included.
  @inline(never)
  func hit(_ key: AccountKey) -> AuthModel? {
    let date = now().timeIntervalSinceReferenceDate
    lock.lock()
    defer { lock.unlock() }
    let index: [AccountKey: Entry].Index
    if let memo, memo.key == key {
      index = memo.index
    } else {
      guard let found = entries.index(forKey: key) else { return nil }
      index = found
      memo = (key, found)
    }
    guard entries.values[index].freshUntil > date else { return nil }
    tick &+= 1
    hits &+= 1
    entries.values[index].lastUsed = tick
    return entries.values[index].model
  }

  /// Stores (or, with `nil`, removes) the model for `key`.
  func set(_ model: AuthModel?, for key: AccountKey) {
    guard let model else {
      lock.withLock {
        memo = nil
        _ = entries.removeValue(forKey: key)
      }
      return
    }
    let freshUntil =
      model.expiresAt.map { $0.timeIntervalSinceReferenceDate - leeway } ?? .infinity
    lock.withLock {
      tick &+= 1
      memo = nil
      entries[key] = Entry(model: model, freshUntil: freshUntil, lastUsed: tick)
    }
  }

  /// Removes every model.
  func removeAll() {
    lock.withLock {
      memo = nil
      entries.removeAll()
    }
  }

  /// A new recency tick, for uses of a key that did not go through ``hit(_:)``.
  func nextTick() -> UInt64 {
    lock.withLock {
      tick &+= 1
      return tick
    }
  }

  /// The last tick at which `key` was hit, if it is cached.
  func lastUsed(_ key: AccountKey) -> UInt64? { lock.withLock { entries[key]?.lastUsed } }

  /// How many hits were served.
  var hitCount: Int { lock.withLock { hits } }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var seconds: Double {
    let (seconds, attoseconds) = components
    return Double(seconds) + Double(attoseconds) / 1e18
  }
}
