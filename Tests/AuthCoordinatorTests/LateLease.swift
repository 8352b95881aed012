import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// An in-memory lease whose change notices arrive only when the test delivers them (never, for
/// a process that has not heard of a change yet), and whose `isCurrent` can be made to fail.
final class LateLease: AuthorizationLease, @unchecked Sendable {
  let inner: InMemoryAuthorizationLease
  private let subscribers = LockedState<[AsyncStream<LeaseChange>.Continuation]>([])
  private let failing = LockedState(false)
  /// Whether `isCurrent` throws (a lease that cannot be read).
  var failsChecks: Bool {
    get { failing.withLock { $0 } }
    set { failing.withLock { $0 = newValue } }
  }

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  /// Delivers `change` to every subscription.
  func deliver(_ change: LeaseChange) {
    for subscriber in subscribers.withLock({ $0 }) { subscriber.yield(change) }
  }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func signOut(account: String, by owner: String) async {
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    if failsChecks { throw CocoaError(.fileReadUnknown) }
    return await inner.isCurrent(grant)
  }
  func changes() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream()
    subscribers.withLock { $0.append(continuation) }
    return stream
  }
}
