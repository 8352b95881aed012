import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// An in-memory lease whose change notices arrive only when the test delivers them (never, for
/// a process that has not heard of a change yet), and whose `isCurrent` can be made to fail or
/// to hang (a database connection that stopped answering).
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

  private let hanging = LockedState<
    (on: Bool, passing: Int, entered: Int, parked: [CheckedContinuation<Void, Never>])
  >((false, 0, 0, []))
  /// Signalled each time a check begins to hang.
  let checkHangs = ChangeSignal()

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  /// From now on, every `isCurrent` but the next `passing` waits until ``releaseChecks()``.
  func hangChecks(after passing: Int = 0) {
    hanging.withLock {
      $0.on = true
      $0.passing = passing
    }
  }

  /// The checks that began to hang so far.
  var hungChecks: Int { hanging.withLock { $0.entered } }

  /// Lets every hanging check (and every later one) answer.
  func releaseChecks() {
    let parked = hanging.withLock { state in
      state.on = false
      defer { state.parked = [] }
      return state.parked
    }
    for continuation in parked { continuation.resume() }
  }

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
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let parked = hanging.withLock { state in
        guard state.on else { return false }
        guard state.passing == 0 else {
          state.passing -= 1
          return false
        }
        state.entered += 1
        state.parked.append(continuation)
        return true
      }
      if parked { checkHangs.changed() } else { continuation.resume() }
    }
    return await inner.isCurrent(grant)
  }
  func changes() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream()
    subscribers.withLock { $0.append(continuation) }
    return stream
  }
}
