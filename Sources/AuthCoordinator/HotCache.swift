import Foundation
import SyncPrimitives

/// The lock-protected mirror the common requests are answered from without entering the actor.
///
/// The actor owns the truth (``AccountStateMachine``) and writes here whenever a key's cached
/// model or its flight changes. An ordinary request (``RefreshPolicy/ifNeeded``) reads here:
/// a valid model is a hit (one lock, one lookup); otherwise, if a flight is in progress, the
/// caller joins it here too, because an ordinary request always joins a running flight and the
/// state machine records nothing for it. Only misses with no flight, and forced refreshes, go
/// to the actor. It also keeps the recency ticks the least-recently-used eviction orders keys
/// by, and counts hits.
final class HotCache: @unchecked Sendable {
  private struct Entry {
    var model: AuthModel
    /// `expiresAt - leeway` as seconds since the reference date; `.infinity` without expiry.
    var freshUntil: Double
    var lastUsed: UInt64
  }

  /// What an ordinary request finds.
  enum Lookup {
    case hit(AuthModel)
    case join(WaiterQueue, ticket: Int)
    case miss
  }

  private let lock = Lock()
  private var entries: [AccountKey: Entry] = [:]
  /// The queues of flights in progress that ordinary requests may join. Apart from `entries`,
  /// so that a hit reads exactly one small entry; only a miss looks here.
  private var flights: [AccountKey: WaiterQueue] = [:]
  /// The last key looked up and its position: a lookup of the same key skips hashing it (most
  /// traffic is one user's). Cleared by every change of `entries`' structure.
  private var memo: (key: AccountKey, index: [AccountKey: Entry].Index)?
  private var tick: UInt64 = 0
  private var hits = 0
  private let now: @Sendable () -> Date
  private let counters: CoordinatorCounters

  init(now: @escaping @Sendable () -> Date, counters: CoordinatorCounters) {
    self.now = now
    self.counters = counters
  }

  /// A hit, a ticket on the flight in progress, or a miss for the actor.
  ///
  /// Out of line on purpose: inlined into the async `authModel`, its temporaries (the hasher,
  /// the entry copy) became part of every caller's async frame, parked callers included.
  @inline(never)
  func lookup(_ key: AccountKey) -> Lookup {
    let date = now().timeIntervalSinceReferenceDate
    lock.lock()
    let index: [AccountKey: Entry].Index?
    if let memo, memo.key == key {
      index = memo.index
    } else {
      index = entries.index(forKey: key)
      if let index { memo = (key, index) }
    }
    tick &+= 1
    if let index {
      entries.values[index].lastUsed = tick
      if entries.values[index].freshUntil > date {
        hits &+= 1
        let model = entries.values[index].model
        lock.unlock()
        return .hit(model)
      }
    }
    let flight = flights[key]
    lock.unlock()
    // A finished queue takes no one: the caller then asks the actor.
    guard let flight, let ticket = flight.reserve() else { return .miss }
    counters.update { $0.coalescedCallers += 1 }
    return .join(flight, ticket: ticket)
  }

  /// Stores (or, with `nil`, forgets) the model for `key`, fresh until `leeway` before its
  /// expiry (the state machine's leeway for that model).
  func set(_ model: AuthModel?, leeway: TimeInterval = 0, for key: AccountKey) {
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

  /// Publishes (or, with `nil`, withdraws) the queue ordinary requests for `key` may join.
  func setFlight(_ queue: WaiterQueue?, for key: AccountKey) {
    lock.withLock { flights[key] = queue }
  }

  /// Forgets everything about `key`.
  func remove(_ key: AccountKey) {
    lock.withLock {
      memo = nil
      _ = entries.removeValue(forKey: key)
      _ = flights.removeValue(forKey: key)
    }
  }

  /// Forgets every model and flight.
  func removeAll() {
    lock.withLock {
      memo = nil
      entries.removeAll()
      flights.removeAll()
    }
  }

  /// A new recency tick, for uses of a key that did not go through ``lookup(_:)``.
  func nextTick() -> UInt64 {
    lock.withLock {
      tick &+= 1
      return tick
    }
  }

  /// The last tick at which `key` was looked up, if it is known here.
  func lastUsed(_ key: AccountKey) -> UInt64? { lock.withLock { entries[key]?.lastUsed } }

  /// How many hits were served.
  var hitCount: Int { lock.withLock { hits } }
}
