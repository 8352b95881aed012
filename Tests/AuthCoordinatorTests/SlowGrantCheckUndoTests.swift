import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Rule 19's undo against a slow lease: a flight wrote its model, and the lease's answer to
/// the check after the write came late. Meanwhile a logout removed the write and a new session
/// stored its own model. The late answer (not current: the logout revoked the grant) must undo
/// the flight's write only, never the new session's model. Found by the randomized stress with
/// lease faults (`STRESS_LEASE_FAULTS`): the undo removed the user's models unconditionally, so
/// the new session's model left the store (its refresh token with it) and a sign-out was
/// announced that nobody made. SIMULATED LEASE: an ``InMemoryAuthorizationLease`` whose
/// answers for the first grant are held by the test, on a manual clock.
@Suite(.timeLimit(.minutes(1))) struct SlowGrantCheckUndoTests {
  @Test func aLateAnswerAfterALogoutUndoesOnlyItsOwnWriteNotTheNewSessionsModel() async throws {
    let clock = ManualClock()
    let lease = FirstGrantCheckGate(InMemoryAuthorizationLease(now: clock.dateSource))
    let store = WatchedStore()
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer,
      configuration: SharedLeaseTests.Rig.configuration(clock) {
        $0.leaseTimeToLive = .milliseconds(600)
        $0.authorizationTimeout = .seconds(10)
      })

    // The first session's flight writes its model; the lease's answer to the check after the
    // write is held.
    let first = Task { try await coordinator.authModel(for: u1) }
    let callA = await authorizer.nextCall()
    callA.succeed(with: makeModel("at-a", clock: clock, expiresIn: 3600))
    try await lease.waitForHeldCheck()
    #expect(await store.inner.model(for: u1)?.accessToken == "at-a")

    // A logout: the flight stops, its write is removed.
    await coordinator.accountStatusChanged(.logout(account: "u1"))
    await expectFailure(first, .signedOut)
    #expect(await store.inner.model(for: u1) == nil)

    // The first grant lapses (its renewals fail), and a new session stores its model.
    lease.failFirstGrantsRenewals()
    clock.advance(by: .seconds(1))
    let second = Task { try await coordinator.authModel(for: u1) }
    let callB = await authorizer.nextCall()
    #expect(callB.request.replacing == nil)
    let newer = makeModel("at-b", clock: clock, expiresIn: 3600)
    callB.succeed(with: newer)
    #expect(try await second.value == newer)
    #expect(await store.inner.model(for: u1) == newer)

    // The late answer: the first grant is not current. The undo looks before it removes.
    let before = store.counts
    lease.answerHeldCheck()
    try await store.changes.waitUntil {
      let now = store.counts
      return now.reads > before.reads || now.removals > before.removals
    }
    #expect(await store.inner.model(for: u1) == newer, "the new session's model stays stored")
    #expect(try await coordinator.authModel(for: u1) == newer)
    #expect(lease.revocations == 1, "only the logout revoked the user's grants")
  }
}

/// A store that signals its reads and removals (the undo's traces) besides its writes.
final class WatchedStore: FencedTokenStore, @unchecked Sendable {
  let inner = InMemoryTokenStore()
  let changes = ChangeSignal()
  private let state = LockedState((reads: 0, removals: 0))

  var counts: (reads: Int, removals: Int) { state.withLock { $0 } }

  func model(for key: AccountKey) async throws -> AuthModel? {
    let model = await inner.model(for: key)
    state.withLock { $0.reads += 1 }
    changes.changed()
    return model
  }
  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await inner.save(model, for: key)
    changes.changed()
  }
  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    defer { changes.changed() }
    return await inner.save(model, for: key, fence: fence)
  }
  func removeModel(for key: AccountKey) async throws {
    await inner.removeModel(for: key)
    removed()
  }
  func removeModels(forAccount account: String) async throws {
    await inner.removeModels(forAccount: account)
    removed()
  }
  func removeAll() async throws {
    await inner.removeAll()
    removed()
  }
  private func removed() {
    state.withLock { $0.removals += 1 }
    changes.changed()
  }
}

/// A lease that holds its second answer about the first grant it gave (the check after that
/// flight's write) until the test releases it, and can fail that grant's renewals.
final class FirstGrantCheckGate: ForwardingLease, @unchecked Sendable {
  struct Failure: Error {}
  let inner: InMemoryAuthorizationLease
  private struct State {
    var firstFence: UInt64?
    var checks = 0
    var held: CheckedContinuation<Void, Never>?
    var open = false
    var failRenewals = false
    var revocations = 0
  }
  private let state = LockedState(State())
  private let signal = ChangeSignal()

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  var revocations: Int { state.withLock { $0.revocations } }

  func waitForHeldCheck() async throws {
    try await signal.waitUntil { self.state.withLock { $0.held != nil } }
  }

  func answerHeldCheck() {
    let held = state.withLock { state -> CheckedContinuation<Void, Never>? in
      state.open = true
      defer { state.held = nil }
      return state.held
    }
    held?.resume()
  }

  func failFirstGrantsRenewals() { state.withLock { $0.failRenewals = true } }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    if case .acquired(let grant) = attempt {
      state.withLock { $0.firstFence = $0.firstFence ?? grant.fence }
    }
    return attempt
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    if state.withLock({ $0.failRenewals && $0.firstFence == grant.fence }) { throw Failure() }
    return await inner.renew(grant, timeToLive: timeToLive)
  }
  func isCurrent(_ grant: LeaseGrant) async -> Bool {
    let holds = state.withLock { state -> Bool in
      guard state.firstFence == grant.fence, !state.open else { return false }
      state.checks += 1
      return state.checks == 2
    }
    if holds {
      await withCheckedContinuation { continuation in
        let open = state.withLock { state -> Bool in
          if !state.open { state.held = continuation }
          return state.open
        }
        signal.changed()
        if open { continuation.resume() }
      }
    }
    return await inner.isCurrent(grant)
  }
  func revokeGrants(ofAccount account: String) async {
    state.withLock { $0.revocations += 1 }
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeGrantsReportingFence(ofAccount account: String) async -> UInt64? {
    state.withLock { $0.revocations += 1 }
    return await inner.revokeGrantsReportingFence(ofAccount: account)
  }
}
