import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// The seams issue: breaks found where two features meet, reproduced through the public API.
/// SIMULATED PROCESSES: coordinators in this test process share one store and one
/// ``InMemoryAuthorizationLease`` on a manual clock; the token server is the
/// ``TestTokenIssuer`` (rotation, reuse revokes the family). Each test failed on the main
/// of 2026-12-04 (4ba0ba1).
@Suite(.timeLimit(.minutes(1))) struct SeamsTests {
  /// A silent (service) authorizer over the scripted one: transient failures are retried.
  struct Silent: Authorizer {
    let inner: ScriptedAuthorizer
    var isInteractive: Bool { false }
    func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
      try await inner.authorize(request)
    }
  }

  /// Break 1: the holder's refresh got 503 with `Retry-After: 3`; during that wait it was
  /// paused past the lease's time to live (here: its renewals fail until the grant lapses),
  /// another process took over and rotated r0. The first then retried with r0 without checking
  /// its lease or re-reading the store, and the server revoked the family.
  @Test func aRetryAfterABackOffNeverSpendsATokenTheSuccessorRotated() async throws {
    let rig = await SharedLeaseTests.Rig(processes: 1, storing: .expired)
    let paused = PausedLease(rig.lease)
    var configuration = SharedLeaseTests.Rig.configuration(rig.clock)
    configuration.leaseTimeToLive = .milliseconds(600)
    configuration.silentRefresh = SilentRefreshPolicy(refreshAhead: nil, maxRetryWait: .seconds(5))
    let silent = Silent(inner: rig.authorizer)
    let a = AuthCoordinator(
      store: rig.store, lease: paused, authorizer: silent, configuration: configuration)
    let b = AuthCoordinator(
      store: rig.store, lease: rig.lease, authorizer: silent, configuration: configuration)
    let events = EventRecorder(a)

    let first = rig.callers.task { try await a.authModel(for: u1) }
    let call1 = await rig.authorizer.nextCall()
    #expect(call1.request.replacing?.refreshToken == rig.stored.refreshToken)
    call1.fail(with: AuthCoordinatorError(.networkError, "503", retryAfter: .seconds(3)))
    try await events.first { if case .retryScheduled = $0 { true } else { false } }
    // A is paused past its grant's time to live: its next renewal finds the grant lapsed.
    paused.lapse()
    rig.clock.advance(by: .seconds(1))
    try await events.first { if case .leaseLost = $0 { true } else { false } }

    // B takes the key over and rotates r0 into r1.
    let second = rig.callers.task { try await b.authModel(for: u1) }
    let call2 = await rig.authorizer.nextCall()
    let rotated = try rig.issuer.refresh(
      call2.request.replacing?.refreshToken, mcUid: "u1", at: rig.clock.date)
    call2.succeed(with: rotated)
    #expect(try await second.value == rotated)

    // A's back-off ends: it must not spend r0 again.
    let after = EventRecorder(a)
    rig.clock.advance(by: .seconds(4))
    let next = try await after.first { event in
      switch event {
      case .authorizationStarted, .flightSucceeded, .flightFailed: return true
      default: return false
      }
    }
    if case .authorizationStarted = next {
      let call3 = await rig.authorizer.nextCall()
      Issue.record("A called the authorizer again after its grant lapsed")
      do {
        call3.succeed(
          with: try rig.issuer.refresh(
            call3.request.replacing?.refreshToken, mcUid: "u1", at: rig.clock.date))
      } catch { call3.fail(with: error) }
      _ = try? await first.value
      #expect(rig.issuer.reuses == 0, "r0 was spent twice")
      return
    }
    #expect(try await first.value == rotated, "A adopts what the successor stored")
    #expect(rig.issuer.reuses == 0)
    #expect(rig.authorizer.callCount == 2)
  }
}

/// A lease whose holder was paused past its time to live: once ``lapse()`` is called, every
/// renewal of a grant taken before finds it lapsed (`nil`), as it would after the pause; grants
/// taken later renew as usual.
final class PausedLease: AuthorizationLease, @unchecked Sendable {
  let inner: InMemoryAuthorizationLease
  private let state = LockedState((granted: Set<UInt64>(), lapsed: Set<UInt64>()))

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  func lapse() { state.withLock { $0.lapsed.formUnion($0.granted) } }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    if case .acquired(let grant) = attempt {
      _ = state.withLock { $0.granted.insert(grant.fence) }
    }
    return attempt
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    if state.withLock({ $0.lapsed.contains(grant.fence) }) { return nil }
    return await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async {
    await inner.release(grant, backingOff: backOff)
  }
  func revokeGrants(ofAccount account: String) async {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func signOut(account: String, by owner: String) async {
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func isCurrent(_ grant: LeaseGrant) async -> Bool { await inner.isCurrent(grant) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
