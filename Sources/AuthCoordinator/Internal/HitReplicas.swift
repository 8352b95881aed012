import Foundation
import SyncPrimitives
import TokenStore

/// A thread's copies of the models it served most recently: the cache hit that writes no
/// shared memory.
///
/// A hit under the stripe's lock writes the lock's word, the key's recency and the stripe's
/// hit count, and its copy of the model retains the model's string buffers: on many cores,
/// every reader of a hot key writes the same few cache lines. A thread that served a key's
/// model twice at the same stripe epoch (``StripeLock/epoch``) keeps a replica of it
/// (``AuthModel/replica()``, buffers of its own) with the epoch and the machine's
/// ``AccountStateMachine/HitWindow``. Its next hits on that key, while the epoch has not
/// moved, are served from the replica: a read of the epoch, the window's check at the
/// request's date (the machine's own rule) and a copy that retains only this thread's buffers.
///
/// - A change to anything in the stripe moves the epoch (``StripeLock/lock()``): the replica
///   is not served again until the machine, asked under the lock, serves an equal model in the
///   same window at the new epoch (``noteHit``); otherwise its copy is dropped (``forget``, or
///   a new candidate). A logout, a new model, a flight, an eviction: nothing a replica serves
///   outlives it.
/// - A copy past its window is dropped when found so; after any sign-out in the process, each
///   thread drops its stale copies at its next hit (``purgeEverywhere()``).
/// - One hit in 64 on a replica takes the lock instead, so that the key's recency (for the
///   least-recently-used eviction) stays within 64 of this thread's hits of the truth.
/// - Hits served from replicas are counted per thread (``ReplicaHitCounts``), so the
///   statistics stay exact.
///
/// Only its thread touches it (``ThreadSlot``); it is never shared, so it needs no lock.
final class HitReplicas {
  final class Entry {
    let coordinator: UInt64
    let key: AccountKey
    var epoch: AtomicCounter
    var seen: UInt64
    var window: KeyMachine.HitWindow
    /// `nil` until a second hit at `seen`: a key hit once is not copied.
    var model: AuthModel?
    let hits: AtomicCounter
    var uses: UInt32 = 0

    init(
      coordinator: UInt64, key: AccountKey, epoch: AtomicCounter, seen: UInt64,
      window: KeyMachine.HitWindow, hits: AtomicCounter
    ) {
      self.coordinator = coordinator
      self.key = key
      self.epoch = epoch
      self.seen = seen
      self.window = window
      self.hits = hits
    }
  }

  /// A coordinator this thread serves replicas for, and its counter of them.
  private struct Tally {
    let coordinator: UInt64
    let counts: ReplicaHitCounts
    let hits: AtomicCounter
  }

  /// Two ways per set: the two modes of one user fall in one set.
  static let capacity = 16
  /// The coordinators with a counter on this thread; the oldest is retired beyond this many.
  static let tallyLimit = 4
  /// One hit in this many on a replica takes the lock, to refresh the key's recency.
  static let recencyPeriod: UInt32 = 64

  private var entries = [Entry?](repeating: nil, count: capacity)
  private var tallies: [Tally] = []
  /// The value of ``purges`` this thread's replicas were last checked against.
  private var purgesSeen: UInt64 = 0

  /// Advanced by every sign-out and every coordinator's end, in any coordinator of the process:
  /// at its next hit each thread drops every copy it holds whose stripe's epoch moved, so that
  /// a signed-out user's tokens, or a released coordinator's (its deinit moves its stripes'
  /// epochs), do not stay in threads' tables. They would never be served: the epoch already
  /// retired them. Current copies are kept.
  private static let purges = AtomicCounter(padded: true)

  /// Asks every thread to drop its stale copies at its next hit (``purges``).
  static func purgeEverywhere() { _ = purges.next() }

  /// This thread's replicas, if it has any.
  @inline(__always)
  static var current: HitReplicas? { ThreadSlot<HitReplicas>.current }

  /// This thread's replicas, created on its first use.
  static var forThisThread: HitReplicas {
    if let current { return current }
    let replicas = HitReplicas()
    ThreadSlot<HitReplicas>.install(replicas)
    return replicas
  }

  private static let coordinatorIDs = AtomicCounter()

  /// A number that names one coordinator for as long as the process runs (an object's address
  /// may be reused).
  static func newCoordinatorID() -> UInt64 { coordinatorIDs.next() }

  deinit {
    for tally in tallies { tally.counts.retire(tally.hits) }
  }

  @inline(__always)
  private static func set(_ hash: UInt32, _ coordinator: UInt64) -> Int {
    Int(truncatingIfNeeded: (hash ^ UInt32(truncatingIfNeeded: coordinator &* 0x9E37_79B9)) & 7)
      &* 2
  }

  /// The model of `key` if this thread holds a replica of it that is current and servable at
  /// `date`; `nil` when the request must take the lock.
  @inline(__always)
  func serve(
    _ key: AccountKey, hash: UInt32, coordinator: UInt64, at date: Date
  ) -> AuthModel? {
    let purges = Self.purges.value
    if purges != purgesSeen {
      purgesSeen = purges
      for case let entry? in entries where entry.epoch.value != entry.seen { entry.model = nil }
    }
    let set = Self.set(hash, coordinator)
    for way in set..<set + 2 {
      guard let entry = entries[way], entry.coordinator == coordinator, entry.key == key else {
        continue
      }
      guard let model = entry.model else { return nil }
      // The stripe changed: the request goes to the machine, and the lock's path then keeps
      // the copy if the machine still serves an equal model (``noteHit``), or drops it
      // (``forget``).
      guard entry.epoch.value == entry.seen else { return nil }
      guard entry.window.admits(model, at: date) else {
        // Expired or due for a refresh ahead: whatever the machine decides, this copy is not
        // served again.
        entry.model = nil
        return nil
      }
      entry.uses &+= 1
      if entry.uses % Self.recencyPeriod == 0 { return nil }
      entry.hits.incrementOwned()
      return model
    }
    return nil
  }

  /// Records a hit on `model` that the machine decided under the stripe's lock at epoch
  /// `seen`. A second hit at the same epoch makes the replica.
  func noteHit(
    _ key: AccountKey, hash: UInt32, coordinator: UInt64, counts: ReplicaHitCounts,
    model: AuthModel, window: KeyMachine.HitWindow, epoch: AtomicCounter, seen: UInt64
  ) {
    let set = Self.set(hash, coordinator)
    var free: Int?
    for way in set..<set + 2 {
      guard let entry = entries[way] else {
        free = free ?? way
        continue
      }
      guard entry.coordinator == coordinator, entry.key == key else { continue }
      if entry.epoch === epoch, entry.seen == seen, entry.window == window {
        if entry.model == nil { entry.model = model.replica() }
      } else if entry.window == window, let copy = entry.model, copy == model {
        // The stripe changed, but the machine serves the same model in the same window: the
        // copy is current at the new epoch (a stripe whose other keys keep changing does not
        // make this thread copy the model again).
        entry.epoch = epoch
        entry.seen = seen
      } else {
        // A candidate again, in the same entry (no allocation).
        entry.epoch = epoch
        entry.seen = seen
        entry.window = window
        entry.model = nil
      }
      return
    }
    // Replace the second way's entry, and move the first's there: the set keeps the two most
    // recent keys.
    let way: Int
    if let free {
      way = free
    } else {
      entries[set + 1] = entries[set]
      way = set
    }
    entries[way] = Entry(
      coordinator: coordinator, key: key, epoch: epoch, seen: seen, window: window,
      hits: tally(for: coordinator, counts))
  }

  /// How many copies of models this thread holds (for tests).
  var copiesHeld: Int { entries.reduce(0) { $0 + ($1?.model == nil ? 0 : 1) } }

  /// Drops this thread's copy of `key`'s model: the machine no longer serves it (the lock's
  /// path found no servable model).
  func forget(_ key: AccountKey, hash: UInt32, coordinator: UInt64) {
    let set = Self.set(hash, coordinator)
    for way in set..<set + 2 {
      guard let entry = entries[way], entry.coordinator == coordinator, entry.key == key else {
        continue
      }
      entry.model = nil
    }
  }

  /// This thread's counter of `coordinator`'s replica hits, registered on first use.
  private func tally(for coordinator: UInt64, _ counts: ReplicaHitCounts) -> AtomicCounter {
    if let tally = tallies.first(where: { $0.coordinator == coordinator }) { return tally.hits }
    if tallies.count >= Self.tallyLimit {
      // The oldest coordinator's entries go with its counter: no hit is counted in a retired
      // counter.
      let oldest = tallies.removeFirst()
      for way in entries.indices where entries[way]?.coordinator == oldest.coordinator {
        entries[way] = nil
      }
      oldest.counts.retire(oldest.hits)
    }
    let tally = Tally(coordinator: coordinator, counts: counts, hits: counts.register())
    tallies.append(tally)
    return tally.hits
  }
}
