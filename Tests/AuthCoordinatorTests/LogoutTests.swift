import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// Rule 9: logout, unbind, logout-all.
@Suite(.timeLimit(.minutes(2))) struct LogoutTests {
  @Test func logoutFailsWaitersClearsEverythingAndCallsTheHook() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store, ignoresCancellation: true)
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await warm.value
    #expect(await store.inner.model(for: u1) != nil)

    let events = EventRecorder(h.coordinator)
    let forced = h.request(refresh: .force(rejecting: "t1"))
    let inFlight = await h.authorizer.nextCall()
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    await expectFailure(forced, .signedOut)
    #expect(await store.inner.model(for: u1) == nil)
    #expect(h.statusChanges.withLock { $0 } == [.logout(account: "u1")])

    // The authorization that was in flight answers late: it must not resurrect the old login.
    inFlight.succeed(with: makeModel("late-old-user"))
    // The discard is an event, emitted after it was counted.
    try await events.first { $0.isLateResultDiscarded }
    #expect(h.stats.lateResultsDiscarded == 1)
    let after = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(with: makeModel("new-login"))
    #expect(try await after.value.accessToken == "new-login")
  }

  @Test func logoutWhileTheNewModelIsBeingPersistedLeavesTheStoreEmpty() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store)
    store.holdSaves()
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    await store.waitForHeldSaves(1)
    let logout = Task { await h.coordinator.accountStatusChanged(.logout(account: "u1")) }
    await expectFailure(caller, .signedOut)
    store.releaseSaves()
    await logout.value
    #expect(await store.inner.model(for: u1) == nil, "the removal ran after the save")
    let next = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t2"))
    #expect(try await next.value.accessToken == "t2")
  }

  @Test func unbindBehavesLikeLogoutAndOnlyForThatUser() async throws {
    let h = Harness()
    for key in [u1, u2] {
      let warm = h.request(key)
      await h.authorizer.nextCall().succeed(with: makeModel("t-\(key.account)", mcUid: key.account))
      _ = try await warm.value
    }
    await h.coordinator.accountStatusChanged(.unbind(account: "u1"))
    #expect(try await h.coordinator.authModel(for: u2).accessToken == "t-u2")
    let again = h.request(u1)
    await h.authorizer.nextCall().succeed(with: makeModel("t-u1-again"))
    #expect(try await again.value.accessToken == "t-u1-again")
    #expect(h.statusChanges.withLock { $0 } == [.unbind(account: "u1")])
  }

  @Test func logoutClearsEveryModeOfTheUser() async throws {
    let other = AccountKey(account: "u1", mode: "someFutureMode")
    let store = InstrumentedStore([
      u1: makeModel("a"), other: makeModel("b"), u2: makeModel("c", mcUid: "u2"),
    ])
    let h = Harness(store: store)
    #expect(try await h.coordinator.authModel(for: other).accessToken == "b")
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    let remaining = store.inner.snapshot
    #expect(remaining[u1] == nil, "cleared though never loaded: .platformOnly is a configured mode")
    #expect(remaining[other] == nil, "cleared because the coordinator had seen it")
    #expect(remaining[u2] != nil)
  }

  @Test func logoutAllSignsOutEveryoneIncludingKeysNotInMemory() async throws {
    let store = InstrumentedStore([u2: makeModel("c", mcUid: "u2")])
    let h = Harness(store: store)
    let waiting = h.request(u1)
    _ = await h.authorizer.nextCall()
    await h.coordinator.accountStatusChanged(.logoutAll)
    await expectFailure(waiting, .signedOut)
    #expect(store.inner.snapshot.isEmpty)
    #expect(store.counts.withLock { $0.removeAlls } == 1)
    let next = h.request(u2)
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing, "u2's stored model is gone")
    call.succeed(with: makeModel("fresh", mcUid: "u2"))
    _ = try await next.value
  }

  @Test func aHitAfterLogoutReturnedNeverSeesTheOldModel() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("old"))
    _ = try await warm.value
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "old")
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    let after = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("new"))
    #expect(try await after.value.accessToken == "new")
  }
}
