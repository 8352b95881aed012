import AuthCoordinator
import Foundation

// The check on unbounded state during the storm (issue 35's invariant "state that grows without
// bound"): before every operation, what each live process and the lease keep is measured
// against what bounds it. Structural bounds first (one key, one flight, one sign-out mark and
// one holder per account; no more waiting callers than calls outstanding); then the records a
// key keeps for its flights' work in progress, against caps far above what a healthy storm
// reaches and far below what a leak of one record per operation reaches in a seed.
extension FleetWorld {
  /// The most a key may keep of each record while the storm lasts. The refused and replaced
  /// refresh tokens are capped by the library itself (8 and 32); the others are tied to work
  /// in progress (a stopped refresh until its task ends, a save retry until it lands or is let
  /// go, a loop-guard start until the window passes).
  static let perKeyCaps: [String: Int] = [
    "stopped flights": 16, "save retries": 8, "saves past their deadline": 8,
    "loop-guard starts": 16, "refused refresh tokens": 8, "replaced refresh tokens": 32,
  ]

  /// Measures what the live processes and the lease keep now, records the largest of each
  /// kind for the summary, and reports a violation for whatever exceeds its bound.
  func checkBoundedState() {
    let accounts = users.count
    let outstanding = lock.withLock {
      calls.values.reduce(into: [Int: Int]()) { $0[$1.process, default: 0] += 1 }
    }
    var seen: [String: Int] = [:]
    func note(_ name: String, _ value: Int, bound: Int) {
      seen[name] = max(seen[name] ?? 0, value)
      // Once per kind and seed: the state stays past its bound at every check after.
      guard value > bound, lock.withLock({ unboundedReported.insert(name).inserted }) else {
        return
      }
      ledger.violation(
        "unbounded state", "\(name): \(value), past its bound \(bound) (\(accounts) accounts)")
    }
    for (index, process) in processes.enumerated() {
      let sizes = process.coordinator.stateSizes
      note("keys in memory, one process", sizes.keys, bound: accounts)
      note("flights in progress, one process", sizes.flights, bound: accounts)
      note("unremoved users, one process", sizes.unremovedUsers, bound: accounts)
      // A latch per key for its last operation and its last write, one per user for its last
      // removal.
      note("store-order entries, one process", sizes.storeOrder, bound: 3 * accounts)
      // Ended flights' deadlines are pruned when a stripe's heap doubles past 64.
      note("deadlines armed, one process", sizes.deadlines, bound: 1_024)
      let waiting = process.coordinator.statistics.waitingCallers
      note(
        "waiting callers past the calls outstanding, one process",
        max(0, waiting - (outstanding[index] ?? 0)), bound: 0)
      for (name, value) in sizes.perKey.sorted(by: { $0.key < $1.key }) {
        note("\(name), one key", value, bound: Self.perKeyCaps[name] ?? .max)
      }
    }
    for lease in leases {
      let history = lease.history
      note("lease sign-out marks", history.signOuts, bound: accounts)
      note("lease holders", history.holders, bound: accounts)
    }
    lock.withLock {
      for (name, value) in seen { largest[name] = max(largest[name] ?? 0, value) }
    }
  }
}
