import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// An in-memory lease whose change notices arrive only when the test delivers them (never, for
/// a process that has not heard of a change yet), and whose `isCurrent` can be made to fail or,
/// through the ``checks`` gate, to hang (a database connection that stopped answering).
final class LateLease: AuthorizationLease, @unchecked Sendable {
  let inner: InMemoryAuthorizationLease
  private let subscribers = LockedState<[AsyncStream<LeaseChange>.Continuation]>([])
  private let failing = LockedState(false)
  private let log = LockedState<[String]>([])
  /// The sign-outs and revocations made through this lease, in order (`revoke u1`,
  /// `signOut u1`).
  var signOutLog: [String] { log.withLock { $0 } }
  private let failingNext = LockedState(0)
  /// Makes the next `count` checks throw.
  func failNextChecks(_ count: Int) { failingNext.withLock { $0 = count } }
  /// Whether `isCurrent` throws (a lease that cannot be read).
  var failsChecks: Bool {
    get { failing.withLock { $0 } }
    set { failing.withLock { $0 = newValue } }
  }

  /// The gate every `isCurrent` passes: closed, it holds the checks (a database connection
  /// that stopped answering).
  let checks = Gate()

  /// The gate every `renew` passes: closed, it holds the renewals (a holder whose renewal
  /// hangs, and whose hold lapses meanwhile).
  let renewals = Gate()

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  /// Delivers `change` to every subscription.
  func deliver(_ change: LeaseChange) {
    for subscriber in subscribers.withLock({ $0 }) { subscriber.yield(change) }
  }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    await renewals.pass()
    return await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func signOut(account: String, by owner: String) async {
    log.withLock { $0.append("signOut \(account)") }
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async {
    log.withLock { $0.append("revoke \(account)") }
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    if failsChecks { throw CocoaError(.fileReadUnknown) }
    let failsNow = failingNext.withLock { count in
      defer { count = max(0, count - 1) }
      return count > 0
    }
    if failsNow { throw CocoaError(.fileReadUnknown) }
    await checks.pass()
    return await inner.isCurrent(grant)
  }
  func changes() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream()
    subscribers.withLock { $0.append(continuation) }
    return stream
  }
}
