import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Rules 14 and 15: bounded memory, injected time; and the model's redaction.
@Suite(.timeLimit(.minutes(2))) struct MemoryAndTimeTests {
  func warm(_ h: Harness, _ key: AccountKey) async throws {
    let task = h.request(key)
    await h.authorizer.nextCall().succeed(with: makeModel("t-\(key.account)", mcUid: key.account))
    _ = try await task.value
  }

  // Rule 14
  @Test func idleKeysBeyondTheLimitAreEvictedLeastRecentlyUsedFirst() async throws {
    let h = Harness { $0.maxIdleKeys = 2 }
    let events = EventRecorder(h.coordinator)
    let a = AccountKey(account: "a")
    let b = AccountKey(account: "b")
    let c = AccountKey(account: "c")
    try await warm(h, a)
    try await warm(h, b)
    _ = try await h.coordinator.authModel(for: a)  // a is now more recent than b
    try await warm(h, c)
    // c's flight evicts after its caller was answered: waited for, not raced.
    let evicted = try await events.first { if case .evicted = $0 { true } else { false } }
    #expect(evicted == .evicted(key: b))
    #expect(h.stats.evictions == 1)
    #expect(h.stats.keysInMemory == 2)
    // a and c are still hits; b was evicted, so it is loaded from the store again.
    let hits = h.stats.cacheHits
    _ = try await h.coordinator.authModel(for: a)
    _ = try await h.coordinator.authModel(for: c)
    #expect(h.stats.cacheHits == hits + 2)
    #expect(try await h.coordinator.authModel(for: b).accessToken == "t-b")
    #expect(h.authorizer.callCount == 3, "b came back from the store, not a new authorization")
  }

  // The fleet simulation's check on unbounded state during a storm reads these sizes: they
  // must count what the coordinator keeps, or the check passes whatever leaks.
  @Test func stateSizesCountTheKeysFlightsAndPerKeyRecordsTheCoordinatorKeeps() async throws {
    let h = Harness()
    let a = AccountKey(account: "a")
    try await warm(h, a)
    try await warm(h, AccountKey(account: "b"))
    var sizes = h.coordinator.stateSizes
    #expect(sizes.keys == 2)
    #expect(sizes.flights == 0)
    #expect(sizes.perKey["loop-guard starts"] == 0)
    let forced = h.request(a, refresh: .force(rejecting: nil))
    let call = await h.authorizer.nextCall()
    sizes = h.coordinator.stateSizes
    #expect(sizes.flights == 1)
    #expect(sizes.deadlines >= 1, "the authorization's deadline is armed")
    call.succeed(with: makeModel("t2", mcUid: "a"))
    _ = try await forced.value
    sizes = h.coordinator.stateSizes
    #expect(sizes.flights == 0)
    #expect(sizes.perKey["loop-guard starts"] == 1, "a forced refresh is counted by the guard")
    #expect(sizes.storeOrder >= 2, "a latch per key for its last store operation")
  }

  // A flight's read is done before its authorization starts: the store order keeps no latch
  // for it while the authorizer runs (it did, 72 bytes of every authorizing key's heap, until
  // the save's turn replaced it).
  @Test func anAuthorizingFlightKeepsNoLatchOfItsFinishedRead() async throws {
    let h = Harness()
    let key = AccountKey(account: "cold")
    let request = h.request(key)
    let call = await h.authorizer.nextCall()
    #expect(h.coordinator.stateSizes.flights == 1)
    #expect(h.coordinator.stateSizes.storeOrder == 0, "the read's latch, kept past the read")
    call.succeed(with: makeModel("t1", mcUid: "cold"))
    #expect(try await request.value.accessToken == "t1")
  }

  // Rule 14: a request the loop guard refuses starts no flight, so it must not make the
  // eviction think a flight is still running (found by reading: refusals drew a flight id).
  @Test func requestsTheLoopGuardRefusedDoNotHideIdleKeysFromEviction() async throws {
    let h = Harness {
      $0.maxIdleKeys = 1
      $0.maxForcedAuthorizations = 1
    }
    let looping = AccountKey(account: "looping")
    try await warm(h, looping)
    let forced = h.request(looping, refresh: .force(rejecting: nil))
    await h.authorizer.nextCall().succeed(with: makeModel("t2", mcUid: "looping"))
    _ = try await forced.value
    for _ in 0..<5 {
      await expectFailure(h.request(looping, refresh: .force(rejecting: nil)), .refreshLoop)
    }
    #expect(h.stats.refreshLoopsStopped == 5)
    for index in 0..<3 { try await warm(h, AccountKey(account: "other-\(index)")) }
    // One idle key may stay; the looping key is kept while its authorizations are in the loop
    // window, so at most two keys are in memory.
    #expect(h.stats.keysInMemory <= 2, "\(h.stats.keysInMemory) keys in memory")
  }

  // Rule 14
  @Test func aKeyWithAFlightInProgressIsNeverEvicted() async throws {
    let h = Harness { $0.maxIdleKeys = 0 }
    let events = EventRecorder(h.coordinator)
    let busy = h.request(u1)
    let call = await h.authorizer.nextCall()
    for index in 0..<20 {
      let key = AccountKey(account: "idle-\(index)")
      try await warm(h, key)
    }
    // The last idle key is evicted by its flight's ending after its caller was answered: the
    // test waits for it (asserted at once, the count lost that race beside two busy loops).
    let coordinator = h.coordinator
    try await events.waitUntil { coordinator.statistics.evictions >= 20 }
    #expect(h.stats.evictions >= 20)
    call.succeed(with: makeModel("t1"))
    #expect(try await busy.value.accessToken == "t1")
  }

  // Rule 14: memory stays bounded with many keys.
  @Test func manyKeysStayBounded() async throws {
    let coordinator = AuthCoordinator(
      authorizer: ClosureAuthorizer { request in
        AuthModel(uid: "2088", accessToken: "t", mcUid: request.key.account)
      },
      configuration: {
        var configuration = AuthCoordinator.Configuration()
        configuration.maxIdleKeys = 100
        return configuration
      }())
    for index in 0..<2_000 {
      _ = try await coordinator.authModel(for: AccountKey(account: "user-\(index)"))
    }
    #expect(coordinator.statistics.keysInMemory <= 100)
    #expect(coordinator.statistics.evictions >= 1_900)
  }

  // Rule 15
  @Test func expiryFollowsTheInjectedDateSource() async throws {
    let h = Harness { $0.refreshLeeway = .seconds(60) }
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1", clock: h.clock, expiresIn: 3600))
    _ = try await first.value
    h.clock.advance(by: .seconds(3540 - 1))
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    h.clock.advance(by: .seconds(1))
    let refreshed = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .expired)
    call.succeed(with: makeModel("t2", clock: h.clock, expiresIn: 3600))
    #expect(try await refreshed.value.accessToken == "t2")
  }

  @Test func theModelNeverPrintsItsToken() {
    let model = AuthModel(
      uid: "2088000000000001", accessToken: "SECRET-TOKEN-123", mcUid: "u1",
      expiresAt: Date(timeIntervalSince1970: 0), extraInfo: ["k": "v"])
    var dumped = ""
    dump(model, to: &dumped)
    for text in [
      model.description, model.debugDescription, "\(model)", String(reflecting: model), dumped,
    ] {
      #expect(!text.contains("SECRET"), "\(text)")
      #expect(text.contains("2088000000000001"))
    }
  }

  @Test func statisticsBalance() async throws {
    let h = Harness()
    let a = h.request()
    await h.authorizer.nextCall().fail(with: AuthCoordinatorError(.userCancelled))
    await expectFailure(a, .userCancelled)
    let b = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t"))
    _ = try await b.value
    let c = h.request(refresh: .force(rejecting: "t"))
    let call = await h.authorizer.nextCall()
    let events = EventRecorder(h.coordinator)
    c.cancel()
    await expectCancelled(c)
    try await events.first { $0.isFlightCancelled(.lastWaiterLeft) }
    // The coordinator counts the stop before it cancels the authorizer's task.
    await call.waitUntilCancelled()
    let s = h.stats
    #expect(s.flightsInProgress == 0)
    #expect(
      s.flightsStarted == s.flightsSucceeded + s.flightsFailed + s.flightsCancelled
        + s.flightsTimedOut + s.flightsInProgress)
    #expect(s.flightsStarted == 3)
  }
}
