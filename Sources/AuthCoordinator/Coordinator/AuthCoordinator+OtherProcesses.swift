import Foundation
import SyncPrimitives

// What other processes that share the store and the lease tell this one: a release wakes the
// flights waiting for the holder's result; a sign-out makes this process forget the user.
extension AuthCoordinator {
  /// The lease announced `change` (from this process or another).
  func leaseChanged(_ change: LeaseChange) {
    leaseWatch.changed()
    switch change {
    case .signedOut(let mcUid, let owner) where owner != leaseOwner:
      signOutElsewhere(in: [table.stripe(forUser: mcUid)]) { $0.mcUid == mcUid }
      broadcaster.emit(.signedOutElsewhere(mcUid: mcUid))
    case .signedOutAll(let owner) where owner != leaseOwner:
      signOutElsewhere(in: table.stripes) { _ in true }
      broadcaster.emit(.signedOutElsewhere(mcUid: nil))
    case .released, .unknown, .signedOut, .signedOutAll:
      // A release needs nothing more: a flight of this process that waits reads the store;
      // a model cached here stays valid until it expires or a container rejects it.
      break
    }
  }

  /// Forgets the selected keys' models (the store is read again on the next request) and stops
  /// their flights: their callers get ``AuthCoordinatorError/Code-swift.struct/signedOut``.
  private func signOutElsewhere(in stripes: [Stripe], where matches: (AccountKey) -> Bool) {
    var closings: [Closing] = []
    for stripe in stripes {
      stripe.lock.lock()
      for key in stripe.accounts.keys.filter(matches) {
        if let ending = stripe.accounts[key]?.machine.signOut(elsewhere: true) {
          closings.append(close(ending, key: key, in: stripe))
        }
      }
      stripe.lock.unlock()
    }
    for closing in closings { carryOut(closing) }
  }
}
