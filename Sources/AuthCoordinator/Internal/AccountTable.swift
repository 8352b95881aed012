import Dispatch
import Foundation
import SyncPrimitives

/// Every account the coordinator knows, partitioned into stripes by user id.
///
/// A stripe is a lock and everything about the keys of the users that hash to it: their state
/// machines, their flights, their store order, their deadlines, their counters. Requests for
/// one key are serialised by its stripe's lock (the state machine runs under it, and only
/// bookkeeping happens there: no suspension, no callback); requests for keys in different
/// stripes run in parallel. All modes of one user share a stripe, so that a logout is one
/// stripe's barrier; `logoutAll` takes every stripe in turn.
///
/// Shared by all stripes, without a lock: the flight ids and the counts of keys and flights the
/// eviction check reads (atomic counters). Recency stamps come from the monotonic clock.
final class AccountTable: Sendable {
  let stripes: [Stripe]
  private let mask: Int
  /// Flight ids, unique across keys: 1, 2, 3, ...
  private let flightIDs = AtomicCounter()
  /// Keys inserted and keys evicted, ever: their difference is the number of keys in memory.
  let inserted = AtomicCounter()
  let evicted = AtomicCounter()
  /// Flights ended, ever (flights started is the last flight id).
  let flightsEnded = AtomicCounter()
  /// One eviction at a time.
  let evictionLock = Lock()
  /// One `logoutAll` at a time places its barrier in the stripes (taken before any stripe's
  /// lock): two placed stripe by stripe without it could overtake each other between stripes
  /// and each wait for the other's removal.
  let barrierLock = Lock()

  /// - Parameter stripeCount: Rounded up to a power of two.
  init(stripeCount: Int) {
    var count = 1
    while count < max(stripeCount, 1) { count <<= 1 }
    stripes = (0..<count).map { _ in Stripe() }
    mask = count - 1
  }

  /// The stripe count for this machine: four per core, between 8 and 64.
  static var defaultStripeCount: Int {
    min(max(ProcessInfo.processInfo.activeProcessorCount * 4, 8), 64)
  }

  /// The stripe that holds every key of `key.account`.
  @inline(__always)
  func stripe(for key: AccountKey) -> Stripe { stripe(forUser: key.account) }

  /// The stripe that holds every key of the user `account`.
  ///
  /// A cheap hash of the id's last bytes (FNV-1a): it runs on every request, and user ids differ
  /// most at their end (sequence numbers, random suffixes).
  func stripe(forUser account: String) -> Stripe { stripe(hash: Self.hash(ofUser: account)) }

  /// The stripe of a user whose id hashes to `hash` (``hash(ofUser:)``).
  @inline(__always)
  func stripe(hash: UInt32) -> Stripe { stripes[Int(hash >> 8) & mask] }

  /// The hash that picks a user's stripe (a hit also uses it to find its thread's replica).
  @inline(__always)
  static func hash(ofUser account: String) -> UInt32 {
    // One function for both representations: a user id must land in the same stripe whether
    // its bytes are contiguous (native strings) or not (some bridged strings on Apple systems).
    account.utf8.withContiguousStorageIfAvailable { stripeHash(of: $0) }
      ?? stripeHash(of: account.utf8)
  }

  /// FNV-1a over the byte count and the last eight bytes.
  @inline(__always)
  static func stripeHash<Bytes: BidirectionalCollection>(of bytes: Bytes) -> UInt32
  where Bytes.Element == UInt8 {
    var hash: UInt32 = 2_166_136_261 ^ UInt32(truncatingIfNeeded: bytes.count)
    for byte in bytes.suffix(8) { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
    return hash
  }

  func nextFlightID() -> UInt64 { flightIDs.next() }

  /// A recency stamp for the least-recently-used eviction, comparable across stripes: the
  /// monotonic clock in nanoseconds (never the injected clock, which tests stop). Cheaper than
  /// a shared counter, whose cache line every core would fight over on each hit.
  func nextTick() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

  /// The number of keys in memory (exact when no insert or eviction is under way).
  var keyCount: Int { Int(truncatingIfNeeded: inserted.value &- evicted.value) }

  /// The number of idle keys (in memory, no flight), from the counters: exact when no request
  /// is under way, an estimate otherwise (the eviction counts exactly, under the stripes' locks).
  var idleEstimate: Int {
    let keys = Int(truncatingIfNeeded: inserted.value &- evicted.value)
    let flights = Int(truncatingIfNeeded: flightIDs.value &- flightsEnded.value)
    return keys - flights
  }
}

/// One partition of the ``AccountTable``. Every variable is guarded by `lock`.
final class Stripe: @unchecked Sendable {
  let lock = StripeLock()
  var accounts: [AccountKey: AccountSlot] = [:]
  /// The order of the store operations of this stripe's keys.
  var storeOperations = StoreSequencer()
  /// Users of this stripe whose logout did not reach the store.
  var unremoved = UnremovedUsers()
  /// The deadlines of this stripe's flights.
  var deadlines = DeadlineQueue()
  /// The earliest deadline the scheduler was asked to wake for (it may wake earlier).
  var reportedEarliest: Duration?
  /// The heap size at which entries of ended flights are dropped next.
  var pruneThreshold = 64
  /// This stripe's part of the statistics, under a lock of its own: an authorizer's
  /// cancellation handler, which runs under `lock`, may read them.
  let counters = CoordinatorCounters()
  /// Cache hits, counted under `lock` (the hit already holds it).
  var hits = 0
  /// The last key looked up and its slot: a lookup of the same key skips hashing it (most
  /// traffic is one user's). Cleared whenever a key is removed.
  var memo: (key: AccountKey, slot: AccountSlot)?

  deinit { lock.destroy() }

  /// The slot of `key`, if it is in memory.
  @inline(__always)
  func slot(_ key: AccountKey) -> AccountSlot? {
    if let memo, memo.key == key { return memo.slot }
    guard let slot = accounts[key] else { return nil }
    memo = (key, slot)
    return slot
  }

  /// Inserts a deadline; returns the instant the scheduler must wake by, if it is earlier than
  /// anything this stripe asked for before.
  func arm(_ entry: consuming DeadlineQueue.Entry) -> Duration? {
    let at = entry.at
    deadlines.insert(entry)
    // Entries of ended flights (and of phases a flight left) stay until due; they are dropped
    // when the heap doubled since the last pruning, so that pruning costs amortised O(1).
    if deadlines.count > pruneThreshold {
      deadlines.prune { entry in
        self.accounts[entry.key]?.machine.hasLiveDeadline(
          of: entry.flight, abandons: entry.abandons) ?? false
      }
      pruneThreshold = max(2 * deadlines.count, 64)
    }
    if let reported = reportedEarliest, reported <= at { return nil }
    reportedEarliest = at
    return at
  }
}

/// The state machine of a key as the coordinator runs it: its flights' effects are ``Flight``s.
typealias KeyMachine = AccountStateMachine<Flight>

/// A key in the table: its state machine, the one record of its flight, its stopped flights and
/// their effects. A class, so that the table's lookups and updates never copy it; every access
/// is under its stripe's lock.
final class AccountSlot {
  var machine: KeyMachine
  /// The recency tick of the last request.
  var lastUsed: UInt64 = 0

  init(machine: KeyMachine) { self.machine = machine }
}
