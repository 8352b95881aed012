import AuthCoordinator
import Foundation

/// A test lease that wraps an ``InMemoryAuthorizationLease``: every requirement it does not
/// implement itself goes to `inner` unchanged, so a wrapper writes only the calls it alters.
protocol ForwardingLease: AuthorizationLease {
  var inner: InMemoryAuthorizationLease { get }
}

extension ForwardingLease {
  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async throws
    -> LeaseAttempt
  {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async throws { await inner.release(grant) }
  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws {
    await inner.release(grant, backingOff: backOff)
  }
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool { await inner.isCurrent(grant) }
  func revokeGrants(ofAccount account: String) async throws {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async throws { await inner.revokeAllGrants() }
  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    await inner.revokeGrantsReportingFence(ofAccount: account)
  }
  func revokeAllGrantsReportingFence() async throws -> UInt64? {
    await inner.revokeAllGrantsReportingFence()
  }
  func signOut(account: String, by owner: String) async throws {
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async throws { await inner.signOutAll(by: owner) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
