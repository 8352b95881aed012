import AuthCoordinator
import Foundation

// The faults added to the fleet simulation after its first ones, each drawn from a stream of
// its own: a process that crashes and restarts, and an account in its other Unicode spelling.
extension FleetWorld {
  /// Process `index` crashes: it stops for good at once (every store, lease and token-server
  /// operation it begins, and every reply it awaits, waits past the end of the run), its
  /// memory is gone and its callers never hear back; its grants lapse with their time to live.
  /// A new process takes its place, with empty memory and an owner of its own, on the same
  /// store and lease.
  func crash(_ index: Int) {
    let old = processes[index]
    ledger.count("fault: crash and restart")
    ledger.note("p\(index) crashed; a new p\(index) starts with empty memory")
    old.state.crash()
    ledger.crashed(index)
    let lost = lock.withLock { () -> Int in
      let ids = calls.values.filter { $0.process == index }.map(\.id)
      for id in ids {
        calls.removeValue(forKey: id)
        crashedCalls.insert(id)
      }
      return ids.count
    }
    if lost > 0 { ledger.count("calls lost with a crashed process", lost) }
    crashedCoordinators.append(old.coordinator)
    let state = FleetProcessState(
      index: index, seed: seed &+ UInt64(crashedCoordinators.count) &* 0x9E37, faults: faults,
      timeToLive: timeToLive)
    processes[index] = (state, makeCoordinator(state, lease: leases[0], date: worldDate))
  }

  /// `user` as a caller spells it: an account with an accent half the time decomposed (NFD),
  /// as another keyboard or platform may type it. The key normalizes it; what it must not do
  /// is split the account in two.
  func spelled(_ user: AccountKey) -> AccountKey {
    guard !user.account.utf8.allSatisfy({ $0 < 0x80 }), spellings.chance(50) else { return user }
    ledger.count("fault: account in its decomposed spelling")
    var key = user
    key.account = user.account.decomposedStringWithCanonicalMapping
    return key
  }
}
