import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Rules 17-20 (Sources/AuthCoordinator/Documentation.docc/Semantics.md): one authorization across processes. SIMULATED PROCESSES:
/// several coordinators in this test process share one store and one
/// ``InMemoryAuthorizationLease``, as an app and its extensions share a `FileTokenStore` and a
/// `FileAuthorizationLease` (the multi-process tests run the file-backed pair in real
/// processes). They share one scripted authorizer, so that its call count is the total.
@Suite(.timeLimit(.minutes(2))) struct SharedLeaseTests {
  @Test func anExpiredModelIsRefreshedOnceForEveryProcessAndEveryCaller() async throws {
    let rig = await Rig(processes: 4, storing: .expired)
    let callers = rig.processes.flatMap { process in
      (0..<50).map { _ in rig.request(process) }
    }
    let call = await rig.authorizer.nextCall()
    #expect(call.request.replacing?.refreshToken == rig.stored.refreshToken)
    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.clock.date)
    call.succeed(with: rotated)
    for caller in callers { #expect(try await caller.value == rotated) }
    #expect(rig.authorizer.callCount == 1)
    #expect(rig.issuer.reuses == 0)
    let authorized = rig.processes.map(\.statistics.authorizationsStarted).reduce(0, +)
    #expect(authorized == 1)
  }

  @Test func aForcedRefreshStormAcrossProcessesAuthorizesOnce() async throws {
    let rig = await Rig(processes: 4, storing: .valid)
    let rejected = rig.stored.accessToken
    let callers = rig.processes.flatMap { process in
      (0..<20).map { _ in rig.request(process, refresh: .force(rejecting: rejected)) }
    }
    let call = await rig.authorizer.nextCall()
    #expect(call.request.reason == .forcedRefresh)
    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.clock.date)
    call.succeed(with: rotated)
    for caller in callers { #expect(try await caller.value == rotated) }
    #expect(rig.authorizer.callCount == 1)
    #expect(rig.issuer.reuses == 0)
  }

  /// Rule 17 without a lease: a flight reads the store before it authorizes, so a model
  /// another process saved is adopted even when this process had one in memory.
  @Test func aFlightAdoptsWhatAnotherProcessStoredInsteadOfAuthorizing() async throws {
    let clock = ManualClock()
    let store = InMemoryTokenStore()
    let authorizer = ScriptedAuthorizer()
    let old = makeModel("old", clock: clock, expiresIn: 3600)
    await store.save(old, for: u1)
    let coordinator = AuthCoordinator(
      store: store, authorizer: authorizer, configuration: Rig.configuration(clock))
    #expect(try await coordinator.authModel(for: u1) == old)

    // Another process refreshed and saved; this one's container then rejects the old token.
    let newer = makeModel("newer", clock: clock, expiresIn: 3600)
    await store.save(newer, for: u1)
    let fresh = try await coordinator.authModel(for: u1, refresh: .force(rejecting: "old"))
    #expect(fresh == newer)
    #expect(authorizer.callCount == 0)
    #expect(coordinator.statistics.adoptedFromStore == 1)
  }

  /// Rule 18: a process that finds the lease held waits for the holder, and takes the lease
  /// over once it lapses (the holder died), never before.
  @Test func aLeaseWhoseHolderDiedIsTakenOverAfterItsTimeToLive() async throws {
    let rig = await Rig(processes: 1, storing: nil)
    _ = await rig.lease.acquire(u1, owner: "dead-process", timeToLive: .seconds(15))
    let caller = rig.request(rig.processes[0])
    // The flight's deadline and its wait for the holder are both asleep on the clock.
    await rig.clock.waitForSleepers(2)
    #expect(rig.authorizer.callCount == 0, "never while another holder's lease is live")
    rig.clock.advance(by: .seconds(14))
    #expect(rig.authorizer.callCount == 0)
    rig.clock.advance(by: .seconds(2))
    let call = await rig.authorizer.nextCall()
    #expect(call.request.reason == .missing)
    call.succeed(with: makeModel("taken-over", clock: rig.clock, expiresIn: 3600))
    #expect(try await caller.value.accessToken == "taken-over")
  }

  /// A holder whose authorization outlives the lease's time to live renews it: no other
  /// process takes it over while the holder is alive.
  @Test func aHolderRenewsItsLeaseWhileItAuthorizes() async throws {
    let clock = ManualClock()
    let store = InMemoryTokenStore()
    let counting = CountingLease(InMemoryAuthorizationLease(now: clock.dateSource))
    let authorizer = ScriptedAuthorizer()
    var configuration = Rig.configuration(clock)
    configuration.leaseTimeToLive = .seconds(15)
    let app = AuthCoordinator(
      store: store, lease: counting, authorizer: authorizer, configuration: configuration)
    let widget = AuthCoordinator(
      store: store, lease: counting, authorizer: authorizer, configuration: configuration)
    let callers = CallerTracker()

    let first = callers.task { try await app.authModel(for: u1) }
    let call = await authorizer.nextCall()
    for round in 1...4 {
      // The flight's deadline and the renewal are asleep; then past the time to live twice
      // over, in all.
      await clock.waitForSleepers(2)
      clock.advance(by: .seconds(10))
      try await counting.renewed.waitUntil { counting.renewals.withLock { $0 } >= round }
    }
    let second = callers.task { try await widget.authModel(for: u1) }
    try await callers.waitUntil { widget.statistics.waitingCallers == 1 }
    #expect(authorizer.callCount == 1, "the renewed lease is not taken over")
    call.succeed(with: makeModel("renewed", clock: clock, expiresIn: 3600))
    #expect(try await first.value.accessToken == "renewed")
    #expect(try await second.value.accessToken == "renewed")
    #expect(authorizer.callCount == 1)
  }

  /// Waiting for the holder is bounded by this process's own authorization deadline.
  @Test func waitingForAnotherProcessIsBoundedByTheAuthorizationDeadline() async throws {
    let rig = await Rig(processes: 1, storing: nil) { $0.authorizationTimeout = .seconds(5) }
    _ = await rig.lease.acquire(u1, owner: "slow-process", timeToLive: .seconds(60))
    let caller = rig.request(rig.processes[0])
    await rig.clock.waitForSleepers(2)
    rig.clock.advance(by: .seconds(5))
    await expectFailure(caller, .timedOut)
    #expect(rig.authorizer.callCount == 0)
  }

  /// Rule 19: a logout in one process makes the others forget the model (they read the store
  /// again, which the logout emptied).
  @Test func aLogoutInOneProcessStopsTheOthersServingTheModel() async throws {
    let rig = await Rig(processes: 2, storing: .valid)
    let (app, widget) = (rig.processes[0], rig.processes[1])
    #expect(try await widget.authModel(for: u1) == rig.stored)
    let widgetEvents = EventRecorder(widget)

    await app.accountStatusChanged(.logout(account: "u1"))
    try await widgetEvents.first { $0 == .signedOutElsewhere(account: "u1") }
    let next = rig.request(widget)
    let call = await rig.authorizer.nextCall()
    #expect(call.request.replacing == nil, "the store was emptied; nothing to refresh")
    call.succeed(with: makeModel("next-login", clock: rig.clock, expiresIn: 3600))
    #expect(try await next.value.accessToken == "next-login")
  }

  /// Rule 19: a result obtained under a lease taken before another process's logout is never
  /// stored, even when this process has not heard of the logout yet.
  @Test func aResultFromBeforeAnotherProcesssLogoutIsNeverStored() async throws {
    let rig = await Rig(processes: 1, storing: .expired, deafToChanges: true)
    let other = AuthCoordinator(
      store: rig.store, lease: rig.lease, authorizer: rig.authorizer,
      configuration: Rig.configuration(rig.clock))
    let caller = rig.request(rig.processes[0])
    let call = await rig.authorizer.nextCall()
    await other.accountStatusChanged(.logout(account: "u1"))
    call.succeed(with: makeModel("stale-login", clock: rig.clock, expiresIn: 3600))
    await expectFailure(caller, .signedOut)
    #expect(await rig.store.model(for: u1) == nil)
  }

  /// Rule 19 with a failed undo: a sign-out elsewhere lands while this process's save is in
  /// the store, so the save is undone; the undo's removal throws and the store keeps the
  /// signed-out user's model. This process must not serve it from the store afterwards, as
  /// after a logout whose own removal failed (rule 21's logout half).
  @Test func aSaveUndoneAfterASignOutElsewhereIsNotServedWhenItsRemovalFailed() async throws {
    let clock = ManualClock()
    let lease = InMemoryAuthorizationLease(now: clock.dateSource)
    let store = InstrumentedStore()
    let authorizer = ScriptedAuthorizer()
    try await store.save(makeModel("old", clock: clock, expiresIn: -7200), for: u1)
    let deaf = AuthCoordinator(
      store: store, lease: LateLease(lease), authorizer: authorizer,
      configuration: Rig.configuration(clock))
    let other = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer, configuration: Rig.configuration(clock))

    store.holdSaves()
    let caller = Task { try await deaf.authModel(for: u1) }
    let call = await authorizer.nextCall()
    call.succeed(with: makeModel("stale-login", clock: clock, expiresIn: 3600))
    // The save passed its checks and is in the store's hands when the other process logs out.
    await store.waitForHeldSaves(1)
    await other.accountStatusChanged(.logout(account: "u1"))
    store.failRemoves(true)
    store.releaseSaves()
    await expectFailure(caller, .signedOut)
    #expect(await store.inner.model(for: u1)?.accessToken == "stale-login", "the undo failed")

    // The next request must authorize, not adopt what the store still holds. (Before the
    // fix it returned the stale model at once, and this answerer was never called.)
    let next = Task { try await deaf.authModel(for: u1) }
    Task {
      let again = await authorizer.nextCall()
      again.succeed(with: makeModel("next-login", clock: clock, expiresIn: 3600))
    }
    #expect(try await next.value.accessToken == "next-login")
  }

  /// Rule 20, extension mode: the authorizer is told it may not interact.
  @Test func anExtensionsAuthorizerIsToldNotToInteract() async throws {
    let rig = await Rig(processes: 1, storing: .expired) { $0.allowsInteraction = false }
    let caller = rig.request(rig.processes[0])
    let call = await rig.authorizer.nextCall()
    #expect(!call.request.allowsInteraction)
    call.fail(with: AuthCoordinatorError(.interactionRequired))
    await expectFailure(caller, .interactionRequired)
  }

  struct Rig {
    enum Stored { case valid, expired }

    let clock = ManualClock()
    let store = InMemoryTokenStore()
    let lease: InMemoryAuthorizationLease
    let authorizer = ScriptedAuthorizer()
    let issuer = TestTokenIssuer()
    let processes: [AuthCoordinator]
    let callers = CallerTracker()
    let stored: AuthModel

    init(
      processes count: Int, storing state: Stored?, deafToChanges: Bool = false,
      configure: (inout AuthCoordinator.Configuration) -> Void = { _ in }
    ) async {
      lease = InMemoryAuthorizationLease(now: clock.dateSource)
      let age: TimeInterval = state == .expired ? -7200 : 0
      stored = issuer.login(mcUid: "u1", at: clock.date.addingTimeInterval(age))
      if state != nil { await store.save(stored, for: u1) }
      var configuration = Self.configuration(clock)
      configure(&configuration)
      let shared: any AuthorizationLease = deafToChanges ? LateLease(lease) : lease
      processes = (0..<count).map { [store, authorizer] _ in
        AuthCoordinator(
          store: store, lease: shared, authorizer: authorizer, configuration: configuration)
      }
    }

    static func configuration(_ clock: ManualClock) -> AuthCoordinator.Configuration {
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
      configuration.clock = clock
      configuration.now = clock.dateSource
      configuration.maxForcedAuthorizations = 100
      return configuration
    }

    func request(
      _ process: AuthCoordinator, refresh: RefreshPolicy = .ifNeeded
    ) -> Task<AuthModel, any Error> {
      callers.task { try await process.authModel(for: u1, refresh: refresh) }
    }
  }
}

/// Counts renewals, and signals each.
private struct CountingLease: AuthorizationLease {
  let inner: InMemoryAuthorizationLease
  let renewals = LockedState(0)
  let renewed = ChangeSignal()
  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    let renewed = await inner.renew(grant, timeToLive: timeToLive)
    renewals.withLock { $0 += 1 }
    self.renewed.changed()
    return renewed
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
  func isCurrent(_ grant: LeaseGrant) async -> Bool { await inner.isCurrent(grant) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
