import Foundation
import SyncPrimitives
import TokenStore

// What other processes that share the store and the lease tell this one: a release wakes the
// flights waiting for the holder's result; a sign-out makes this process forget the user.
extension AuthCoordinator {
  /// The lease announced `change` (from this process or another).
  func leaseChanged(_ change: LeaseChange) {
    leaseWatch.changed()
    switch change {
    case .signedOut(let account, let owner) where owner != leaseOwner:
      signOutElsewhere(in: [table.stripe(forUser: account)]) { $0.account == account }
      broadcaster.emit(.signedOutElsewhere(account: account))
    case .signedOutAll(let owner) where owner != leaseOwner:
      signOutElsewhere(in: table.stripes) { _ in true }
      broadcaster.emit(.signedOutElsewhere(account: nil))
    case .released, .unknown, .signedOut, .signedOutAll:
      // A release needs nothing more: a flight of this process that waits reads the store;
      // a model cached here stays valid until it expires or a container rejects it.
      break
    }
  }

  /// Whether `grant` was taken after the announced sign-out. In doubt (the lease cannot be
  /// read), no: the flight stops as it would have without the check, since a logout is never
  /// undone on a guess; what is lost then is a refresh at worst, never a signed-out session
  /// brought back.
  func grantOutlivesAnnouncement(_ grant: LeaseGrant) async -> Bool {
    guard let lease else { return true }
    do { return try await lease.isCurrent(grant) } catch {
      reportStoreFailure(grant.key, .lease, error)
      return false
    }
  }

  /// Forgets the selected keys' models (the store is read again on the next request) and stops
  /// their flights: their callers get ``AuthCoordinatorError/Code-swift.struct/signedOut``. A
  /// flight that holds a lease grant stops only once the lease says the grant is not current:
  /// the announcement may be late, and the grant a newer session's (the machine decides,
  /// ``AccountStateMachine/signOutAnnounced(flightHoldsGrant:)``).
  private func signOutElsewhere(in stripes: [Stripe], where matches: (AccountKey) -> Bool) {
    var closings: [Closing] = []
    var checks: [(key: AccountKey, flight: UInt64, grant: LeaseGrant)] = []
    for stripe in stripes {
      stripe.lock.lock()
      for key in stripe.accounts.keys.filter(matches) {
        guard let slot = stripe.accounts[key] else { continue }
        let grant = slot.machine.effects?.publishedGrant
        switch slot.machine.signOutAnnounced(flightHoldsGrant: grant != nil, grant: grant) {
        case .stopped(let ending):
          if let ending { closings.append(close(ending, key: key, in: stripe)) }
        case .checkGrant(let flight):
          if let grant { checks.append((key, flight, grant)) }
        }
      }
      stripe.lock.unlock()
    }
    for closing in closings { carryOut(closing) }
    guard !checks.isEmpty else { return }
    Task { [weak self] in
      for check in checks {
        guard let self else { return }
        let current = await self.grantOutlivesAnnouncement(check.grant)
        let stripe = self.table.stripe(for: check.key)
        stripe.lock.lock()
        let closing = stripe.accounts[check.key]?.machine
          .signOutChecked(flight: check.flight, grantCurrent: current)
          .map { self.close($0, key: check.key, in: stripe) }
        stripe.lock.unlock()
        if let closing { self.carryOut(closing) }
      }
    }
  }
}
