import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Rules 1-5: serial per key, cache hits, cold start, coalescing, forced refresh.
@Suite(.timeLimit(.minutes(2))) struct SerialAndCoalescingTests {
  // Rule 1
  @Test func oneFlightPerKeyButKeysRunInParallel() async throws {
    let h = Harness()
    let a1 = h.request(u1)
    let a2 = h.request(u1)
    let b1 = h.request(u2)
    let first = await h.authorizer.nextCall()
    let second = await h.authorizer.nextCall()
    try await h.waitForWaiters(3)
    #expect(h.authorizer.callCount == 2, "u1 and u2 are authorized at the same time")
    #expect(Set([first.key, second.key]) == [u1, u2])
    for call in [first, second] {
      call.succeed(with: makeModel("t-\(call.key.account)", mcUid: call.key.account))
    }
    #expect(try await a1.value.accessToken == "t-u1")
    #expect(try await a2.value.accessToken == "t-u1")
    #expect(try await b1.value.accessToken == "t-u2")
    #expect(h.authorizer.callCount == 2)
  }

  // Rule 2
  @Test func cacheHitDoesNoStoreIO() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store)
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1", clock: h.clock, expiresIn: 3600))
    _ = try await first.value
    let before = store.counts.withLock { $0 }
    for _ in 0..<1000 { _ = try await h.coordinator.authModel(for: u1) }
    #expect(store.counts.withLock { $0 } == before)
    #expect(h.stats.cacheHits == 1000)
    #expect(h.stats.flightsStarted == 1, "the cold load went on to authorize in the same flight")
  }

  // Rule 2: validity with the leeway.
  @Test func aModelWithinTheLeewayIsRefreshed() async throws {
    let h = Harness { $0.refreshLeeway = .seconds(60) }
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1", clock: h.clock, expiresIn: 90))
    _ = try await first.value
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    // A 90 s token gets a leeway of min(60, 90 / 2) = 45 s: served while more than 45 s remain.
    h.clock.advance(by: .seconds(44))
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    h.clock.advance(by: .seconds(2))  // 44 s left: inside the leeway
    let second = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .expired)
    call.succeed(with: makeModel("t2", clock: h.clock, expiresIn: 3600))
    #expect(try await second.value.accessToken == "t2")
  }

  // Rule 2: no expiry means valid until rejected.
  @Test func aModelWithoutExpiryStaysValid() async throws {
    let h = Harness()
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await first.value
    h.clock.advance(by: .seconds(86_400 * 365))
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    #expect(h.authorizer.callCount == 1)
  }

  // Rule 3
  @Test func coldStartServesAValidStoredModelInOneLoad() async throws {
    let clock = ManualClock()
    let store = InstrumentedStore([u1: makeModel("stored", clock: clock, expiresIn: 3600)])
    let h = Harness(store: store) {
      $0.clock = clock
      $0.now = clock.dateSource
    }
    let callers = (0..<50).map { _ in h.request() }
    for caller in callers { #expect(try await caller.value.accessToken == "stored") }
    #expect(store.counts.withLock { $0.reads } == 1)
    #expect(h.authorizer.callCount == 0)
    #expect(h.stats.flightsStarted == 1)
  }

  // Rule 3
  @Test func coldStartWithAnExpiredModelAuthorizesInTheSameFlight() async throws {
    let clock = ManualClock()
    let store = InstrumentedStore([u1: makeModel("old", clock: clock, expiresIn: 10)])
    let h = Harness(store: store) {
      $0.clock = clock
      $0.now = clock.dateSource
    }
    let callers = (0..<20).map { _ in h.request() }
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .expired)
    try await h.waitForWaiters(20)
    call.succeed(with: makeModel("new", clock: clock, expiresIn: 3600))
    for caller in callers { #expect(try await caller.value.accessToken == "new") }
    #expect(h.stats.flightsStarted == 1)
    #expect(h.stats.flightsSucceeded == 1)
    #expect(store.counts.withLock { $0.reads } == 1)
  }

  // Rule 3: a model stored under the key but for another user is never served.
  @Test func aStoredModelOfAnotherUserIsIgnored() async throws {
    let store = InstrumentedStore([u1: makeModel("theirs", mcUid: "someone-else")])
    let h = Harness(store: store)
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(with: makeModel("mine"))
    #expect(try await caller.value.accessToken == "mine")
  }

  // Rule 4
  @Test func tenThousandCallersOnAnExpiredTokenCauseOneAuthorization() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t0", clock: h.clock, expiresIn: 100))
    _ = try await warm.value
    h.clock.advance(by: .seconds(100))

    let n = 10_000
    let coordinator = h.coordinator
    // Tracked, so that the test can await the group's callers parking.
    try await h.callers.withTracking {
      try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<n { group.addTask { try await coordinator.authModel(for: u1).accessToken } }
        let call = await h.authorizer.nextCall()
        #expect(call.reason == .expired)
        try await h.waitForWaiters(n)
        call.succeed(with: makeModel("t1", clock: h.clock, expiresIn: 3600))
        var served = 0
        for try await token in group {
          #expect(token == "t1")
          served += 1
        }
        #expect(served == n)
      }
    }
    #expect(h.authorizer.callCount == 2)
    #expect(h.stats.authorizationsStarted == 2)
    #expect(h.stats.coalescedCallers == n - 1)
    #expect(h.stats.waitingCallers == 0)
  }

  // Rule 5
  @Test func forcedRefreshReturnsADifferentValidCachedToken() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t2"))
    _ = try await warm.value
    let model = try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: "t1"))
    #expect(model.accessToken == "t2")
    #expect(h.authorizer.callCount == 1)
  }

  // Rule 5
  @Test func forcedRefreshWithoutATokenRejectsTheCachedOne() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await warm.value
    let forced = h.request(refresh: .force(rejecting: nil))
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .forcedRefresh)
    call.succeed(with: makeModel("t2"))
    #expect(try await forced.value.accessToken == "t2")
  }

  // Rule 5
  @Test func forcedRefreshJoinsAnAuthorizationInFlight() async throws {
    let h = Harness()
    let ordinary = h.request()
    let call = await h.authorizer.nextCall()
    let forced = h.request(refresh: .force(rejecting: "whatever"))
    try await h.waitForWaiters(2)
    call.succeed(with: makeModel("t1"))
    #expect(try await ordinary.value.accessToken == "t1")
    #expect(try await forced.value.accessToken == "t1")
    #expect(h.authorizer.callCount == 1)
  }

  // Rule 5: never join a flight that can only return the rejected token (a cold load of it).
  @Test func forcedRefreshOfTheStoredTokenIsNotAnsweredFromTheStore() async throws {
    let store = InstrumentedStore([u1: makeModel("rejected")])
    store.holdSaves()
    let h = Harness(store: store)
    let forced = h.request(refresh: .force(rejecting: "rejected"))
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .forcedRefresh)
    store.releaseSaves()
    call.succeed(with: makeModel("fresh"))
    #expect(try await forced.value.accessToken == "fresh")
  }

  // Rule 5: ... nor one whose result is already the rejected token (it is being persisted).
  @Test func forcedRefreshOfThePersistingTokenStartsANewAuthorizationAfterIt() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store)
    store.holdSaves()
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    await store.waitForHeldSaves(1)
    let forced = h.request(refresh: .force(rejecting: "t1"))
    try await h.waitForWaiters(2)
    store.releaseSaves()
    #expect(try await first.value.accessToken == "t1")
    let second = await h.authorizer.nextCall()
    #expect(second.reason == .forcedRefresh)
    second.succeed(with: makeModel("t2"))
    #expect(try await forced.value.accessToken == "t2")
  }

  // Rule 5
  @Test func tenThousandForcedRefreshesOfOneTokenCauseOneAuthorization() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await warm.value

    let n = 10_000
    let coordinator = h.coordinator
    // Tracked, so that the test can await the group's callers parking.
    try await h.callers.withTracking {
      try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<n {
          group.addTask {
            try await coordinator.authModel(for: u1, refresh: .force(rejecting: "t1")).accessToken
          }
        }
        let call = await h.authorizer.nextCall()
        #expect(call.reason == .forcedRefresh)
        // Release before all have arrived: latecomers see t2 cached and are served from it.
        try await h.waitForWaiters(n / 2)
        call.succeed(with: makeModel("t2"))
        for try await token in group { #expect(token == "t2") }
      }
    }
    #expect(h.authorizer.callCount == 2, "one warm-up, one refresh")
    #expect(h.stats.refreshLoopsStopped == 0)
  }

  // Rule 5: the container's extendParams.
  @Test func extendParamsAskForARefresh() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await warm.value
    let coordinator = h.coordinator
    let forced = Task {
      try await coordinator.authModel(for: u1, extendParams: ["needrefreshtoken": "YES"])
    }
    await h.authorizer.nextCall().succeed(with: makeModel("t2"))
    #expect(try await forced.value.accessToken == "t2")
    let plain = try await coordinator.authModel(for: u1, extendParams: ["NeedRefreshToken": false])
    #expect(plain.accessToken == "t2")
  }
}
