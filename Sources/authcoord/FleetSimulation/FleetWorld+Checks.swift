import AuthCoordinator
import Foundation

// The checks at the end of a seed: the reuse classification, what the store was left on, and
// the state left behind once the storm passed.
extension FleetWorld {
  func finalChecks() async {
    checkNothingLeftBehind()
    // A reuse is inside the contract's stated window when the first spend left under a live
    // grant, the reuse left under a live grant, and the rotation was not stored under a live
    // grant before the reuse left: the first spender's grant ended after its request left and
    // before its result was stored. A request whose grant was live when it was handed to the
    // transport and had lapsed when it left (the gap between the last check and the send) is
    // counted apart. Every other reuse breaks rule 16.
    var excusedFamilies: Set<String> = []
    for reuse in ledger.reuses {
      let stored = ledger.rotationStored(after: reuse.token)
      let afterRotationStored = stored.map { $0 < reuse.second.at } ?? false
      let gap = [reuse.first, reuse.second].contains { $0.liveAtEntry && !$0.liveAtLeft }
      let text =
        "\(FleetTransport.short(reuse.token)) spent by \(reuse.first.caller) at "
        + "\(reuse.first.at) (live grant \(reuse.first.liveAtLeft)), presented again by "
        + "\(reuse.second.caller) at \(reuse.second.at) (live grant \(reuse.second.liveAtLeft))"
      if !afterRotationStored, reuse.first.liveAtLeft, reuse.second.liveAtLeft {
        ledger.count("reuse inside the stated window")
        excusedFamilies.insert(Self.family(reuse.token))
      } else if gap {
        // Stopped between the coordinator's last check of its grant and the send: a successor
        // may even have rotated and stored meanwhile. No client closes that gap.
        ledger.count("reuse in the gap at the send")
        excusedFamilies.insert(Self.family(reuse.token))
      } else {
        ledger.violation(
          "refresh token reuse",
          text + (afterRotationStored ? "; its rotation was stored before" : ""))
      }
    }
    for user in users {
      guard let model = await store.model(for: user), let token = model.refreshToken else {
        continue
      }
      guard !ledger.isNewest(token), server.status(of: model.accessToken) != .revoked,
        !excusedFamilies.contains(Self.family(token))
      else { continue }
      if ledger.rotationDiedInACrash(after: token) {
        ledger.count("stale store after a crash (the rotation died with its process)")
      } else if ledger.rotationUndelivered(after: token) {
        // The server rotated and the reply was garbled: no client could keep the rotation.
        ledger.count("stale store after a garbled reply (the rotation reached no client)")
      } else if ledger.bornDuringAStoppedLogout(user.account, access: model.accessToken) {
        // The open race: see ``FleetLedger/bornDuringAStoppedLogout(_:access:)``.
        ledger.count("stale store of a session born during a stopped logout (open race)")
      } else {
        ledger.violation(
          "stale store",
          "at the end the store holds \(FleetTransport.short(token)) for \(user.account), whose "
            + "rotation exists and whose family is live: a rotation was lost")
      }
    }
  }

  /// Once the storm passed and the calls ended, nothing grows or lingers: no flight or
  /// waiting caller in a live process, at most one key in memory per account (no state per
  /// spelling, per flight or per failure left behind), and the lease keeping at most one
  /// sign-out mark and one holder per account and key.
  func checkNothingLeftBehind() {
    let accounts = users.count
    for (index, process) in processes.enumerated() {
      let stats = process.coordinator.statistics
      if stats.flightsInProgress > 0 || stats.waitingCallers > 0 {
        ledger.violation(
          "state left behind",
          "p\(index) still has \(stats.flightsInProgress) flights and "
            + "\(stats.waitingCallers) waiting callers after the run")
      }
      if stats.keysInMemory > accounts {
        ledger.violation(
          "state left behind", "p\(index) holds \(stats.keysInMemory) keys for \(accounts) accounts"
        )
      }
    }
    for lease in leases {
      let history = lease.history
      if history.signOuts > accounts || history.holders > accounts {
        ledger.violation(
          "state left behind",
          "the lease keeps \(history.signOuts) sign-out marks and \(history.holders) holders for "
            + "\(accounts) accounts")
      }
    }
  }

  /// `simulated-refresh-<family>-<n>` → `<family>`.
  static func family(_ token: String) -> String {
    token.split(separator: "-").dropLast().last.map(String.init) ?? token
  }
}
