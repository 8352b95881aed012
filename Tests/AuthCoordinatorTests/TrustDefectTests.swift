import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Regression tests for the defects an outside review reproduced through the public API
/// (logout, store deadlines, huge timeouts, short-lived tokens, the loop guard and eviction,
/// a save that outlives its callers). Each failed before its fix.
@Suite(.timeLimit(.minutes(2))) struct TrustDefectTests {
  static let custom = AuthMode(rawValue: "customMode")

  // MARK: Logout leaves no model of the user, in any mode

  @Test func logoutRemovesAnEvictedKeysModelAndTheNextRequestAuthorizes() async throws {
    let key = AccountKey(account: "u1", mode: Self.custom)
    let h = Harness { $0.maxIdleKeys = 1 }
    let first = h.request(key)
    await h.authorizer.nextCall().succeed(with: makeModel("before-logout"))
    _ = try await first.value
    for other in 2...5 {
      let otherKey = AccountKey(account: "u\(other)")
      let warm = h.request(otherKey)
      await h.authorizer.nextCall().succeed(with: makeModel("t\(other)", mcUid: "u\(other)"))
      _ = try await warm.value
    }
    #expect(h.stats.evictions >= 1, "u1's custom key was evicted from memory")

    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(try await h.store.model(for: key) == nil, "the evicted key's model left the store")

    let again = h.request(key)
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(with: makeModel("after-logout"))
    #expect(try await again.value.accessToken == "after-logout")
  }

  @Test func logoutAfterARelaunchRemovesModesThisProcessNeverSaw() async throws {
    let key = AccountKey(account: "u1", mode: Self.custom)
    let store = InMemoryTokenStore([
      key: makeModel("stored"), u1: makeModel("stored-platform"), u2: makeModel("u2", mcUid: "u2"),
    ])
    let h = Harness(store: store)
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(store.snapshot.keys.filter { $0.account == "u1" }.isEmpty)
    #expect(store.snapshot[u2] != nil, "other users stay signed in")
  }

  // MARK: Store calls are bounded

  @Test func aLoadThatNeverReturnsFailsTheCallersAtTheDeadline() async throws {
    let store = GatedStore()
    store.hold(.load)
    let h = Harness(store: store) { $0.authorizationTimeout = .seconds(1) }
    let caller = h.request()
    let joiner = h.request()
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(1))
    await expectFailure(caller, .storeFailed)
    await expectFailure(joiner, .storeFailed)
    #expect(h.authorizer.callCount == 0, "a stuck store is not a reason to bounce the user")
    store.release(.load)
  }

  @Test func aSaveThatNeverReturnsStillServesTheModelAtTheDeadline() async throws {
    let store = GatedStore()
    store.hold(.save)
    let h = Harness(store: store) { $0.authorizationTimeout = .seconds(1) }
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    await store.waitForHeld(.save)
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(1))
    #expect(try await caller.value.accessToken == "t1", "rule 10: a store failure fails no one")
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1", "and it is cached")
    #expect(h.stats.storeFailures == 1)
    store.release(.save)
  }

  @Test func logoutReturnsWhileTheStoreIsStuckAndNoLaterLoadBringsTheModelBack() async throws {
    let custom = AccountKey(account: "u1", mode: Self.custom)
    let store = GatedStore([u1: makeModel("old"), custom: makeModel("old-custom")])
    let h = Harness(store: store) { $0.authorizationTimeout = .seconds(1) }
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "old")

    store.hold(.remove)
    let logout = Task { await h.coordinator.accountStatusChanged(.logout(account: "u1")) }
    await store.waitForHeld(.remove)
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(1))
    await logout.value  // returns although the removal has not finished
    #expect(h.statusChanges.withLock { $0 } == [.logout(account: "u1")])
    #expect(h.stats.storeFailures == 1, "the stuck removal is reported")

    // A mode this process never loaded must be read from the store: the load is ordered after
    // the pending removal, so it cannot read the old model; it fails at the store deadline.
    let during = h.request(custom)
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(1))
    await expectFailure(during, .storeFailed)
    #expect(h.authorizer.callCount == 0)

    store.release(.remove)
    // The removal finishing after the logout returned emits no event: await the store's own
    // signal.
    try await store.changes.waitUntil { store.inner.snapshot.isEmpty }
    let after = h.request(custom)
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing, "the removal ran: nothing to serve")
    call.succeed(with: makeModel("new"))
    #expect(try await after.value.accessToken == "new")
  }

  @Test func aRemovalThatFailedNeverLetsALaterLoadServeTheOldModel() async throws {
    let store = GatedStore([u1: makeModel("old")])
    let h = Harness(store: store) { $0.maxIdleKeys = 0 }
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "old")
    store.fail(.remove)
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(h.stats.storeFailures == 1)
    #expect(await store.inner.model(for: u1)?.accessToken == "old", "the store still has it")

    let after = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing, "the stored model of a signed-out user is not served")
    call.succeed(with: makeModel("new"))
    #expect(try await after.value.accessToken == "new")
  }

  // MARK: Huge timeouts

  @Test func aTimeoutTooLargeForTheClockMeansNoTimeout() async throws {
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(Int64.max))
    configuration.exchangeTimeout = .seconds(Int64.max)
    let coordinator = AuthCoordinator(
      authorizer: ClosureAuthorizer { request in
        try await request.exchange { makeModel("t1") }
      },
      configuration: configuration)
    let model = try await coordinator.authModel(for: u1, timeout: .seconds(Int64.max))
    #expect(model.accessToken == "t1")
    let forced = try await coordinator.authModel(
      for: u1, refresh: .force(rejecting: "t1"), timeout: .seconds(Int64.max))
    #expect(forced.accessToken == "t1")
  }

  // MARK: Tokens shorter than the leeway

  @Test func aTokenThatArrivesInsideTheLeewayIsServedForHalfItsLifetime() async throws {
    let h = Harness()  // leeway 60 s
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1", clock: h.clock, expiresIn: 30))
    _ = try await first.value
    for _ in 0..<10 {
      #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    }
    #expect(h.authorizer.callCount == 1, "ten requests, one authorization")
    h.clock.advance(by: .seconds(14))
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    h.clock.advance(by: .seconds(2))  // past half of the 30 s lifetime
    let renewal = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .expired)
    call.succeed(with: makeModel("t2", clock: h.clock, expiresIn: 30))
    #expect(try await renewal.value.accessToken == "t2")
  }

  @Test func repeatedRenewalsOfTokensShorterThanTheLeewayAreALoop() async throws {
    let h = Harness()  // leeway 60 s; 3 per 60 s
    for round in 0..<4 {
      let caller = h.request()
      let call = await h.authorizer.nextCall()
      #expect(call.reason == (round == 0 ? .missing : .expired))
      call.succeed(with: makeModel("t\(round)", clock: h.clock, expiresIn: 20))
      _ = try await caller.value
      h.clock.advance(by: .seconds(11))  // past half of the 20 s lifetime
    }
    // Three renewals within 33 s of tokens that arrived inside the leeway: the fourth is a loop.
    await expectFailure(h.request(), .refreshLoop)
    #expect(h.authorizer.callCount == 4, "the first authorization plus three renewals")
  }

  // MARK: Eviction keeps the loop guard's history

  @Test func theLoopGuardRemembersAKeyAcrossEviction() async throws {
    let h = Harness { $0.maxIdleKeys = 1 }
    for round in 0...3 {
      let caller = h.request(refresh: round == 0 ? .ifNeeded : .force(rejecting: nil))
      await h.authorizer.nextCall().succeed(with: makeModel("t\(round)"))
      _ = try await caller.value
    }
    for other in 2...4 {
      let otherKey = AccountKey(account: "u\(other)")
      let warm = h.request(otherKey)
      await h.authorizer.nextCall().succeed(with: makeModel("o\(other)", mcUid: "u\(other)"))
      _ = try await warm.value
    }
    let calls = h.authorizer.callCount
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: nil))
    }
    #expect(h.authorizer.callCount == calls)
  }

  // MARK: A save that outlives its last caller

  @Test func aModelSavedAfterItsLastCallerLeftIsCachedToo() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store)
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1", clock: h.clock, expiresIn: 100))
    _ = try await warm.value
    h.clock.advance(by: .seconds(50))  // inside the leeway: expired

    store.holdSaves()
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t2", clock: h.clock, expiresIn: 3600))
    await store.waitForHeldSaves(1)
    caller.cancel()
    await expectCancelled(caller)
    store.releaseSaves()
    // The save of an abandoned flight emits no event when it lands: await the store's own
    // signal.
    try await store.changes.waitUntil { store.inner.snapshot[u1]?.accessToken == "t2" }

    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t2")
    #expect(h.authorizer.callCount == 2, "memory and store agree: no third authorization")
  }
}
