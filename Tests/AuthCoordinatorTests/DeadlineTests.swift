import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// Rule 8: authorization and exchange deadlines; late results are discarded.
@Suite(.timeLimit(.minutes(2))) struct DeadlineTests {
  @Test func anAuthorizationPastItsDeadlineFailsEveryWaiterAndIsCancelled() async throws {
    let h = Harness { $0.authorizationTimeout = .seconds(120) }
    let callers = (0..<5).map { _ in h.request() }
    let call = await h.authorizer.nextCall()
    try await h.waitForWaiters(5)
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(119))
    #expect(h.stats.flightsTimedOut == 0)
    h.clock.advance(by: .seconds(1))
    for caller in callers { await expectFailure(caller, .timedOut) }
    await call.waitUntilCancelled()
    #expect(h.stats.flightsTimedOut == 1)
    #expect(h.stats.flightsInProgress == 0)
  }

  @Test func aLateResultIsNeitherReturnedCachedNorPersisted() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store, ignoresCancellation: true)
    let events = EventRecorder(h.coordinator)
    let caller = h.request()
    let stale = await h.authorizer.nextCall()
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(120))
    await expectFailure(caller, .timedOut)

    // The authorizer ignores cancellation and is still running; a new request may start anyway.
    let next = h.request()
    let fresh = await h.authorizer.nextCall()
    stale.succeed(with: makeModel("late"))
    // The discard is an event, emitted after it was counted.
    try await events.first { $0.isLateResultDiscarded }
    #expect(h.stats.lateResultsDiscarded == 1)
    #expect(await store.inner.model(for: u1) == nil, "the late model was not persisted")
    fresh.succeed(with: makeModel("fresh"))
    #expect(try await next.value.accessToken == "fresh")
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "fresh")
    #expect(store.counts.withLock { $0.saves } == 1)
  }

  @Test func theExchangeHasItsOwnDeadline() async throws {
    let h = Harness {
      $0.authorizationTimeout = .seconds(300)
      $0.exchangeTimeout = .seconds(30)
    }
    var events = h.coordinator.events.makeAsyncIterator()
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    h.clock.advance(by: .seconds(200))  // the user spends 200 s in Alipay
    call.beginExchange()
    await call.waitUntilInExchange()
    h.clock.advance(by: .seconds(29))
    #expect(h.stats.flightsTimedOut == 0)
    h.clock.advance(by: .seconds(1))
    await expectFailure(caller, .timedOut)
    await call.waitUntilCancelled()
    while let event = await events.next() {
      if case .flightTimedOut(_, _, let phase) = event {
        #expect(phase == .exchange)
        break
      }
    }
  }

  @Test func theAuthorizationDeadlineNoLongerAppliesDuringTheExchange() async throws {
    let h = Harness {
      $0.authorizationTimeout = .seconds(60)
      $0.exchangeTimeout = .seconds(30)
    }
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    h.clock.advance(by: .seconds(50))
    call.beginExchange()
    await call.waitUntilInExchange()
    // 70 s after the call: past the authorization deadline, within the exchange's 30 s.
    h.clock.advance(by: .seconds(20))
    call.succeed(with: makeModel("t1"))
    #expect(try await caller.value.accessToken == "t1")
    #expect(h.stats.flightsTimedOut == 0)
  }

  @Test func theDeadlineCountsFromTheCallIntoTheAuthorizer() async throws {
    let clock = ManualClock()
    let store = InstrumentedStore([u1: makeModel("old", clock: clock, expiresIn: 1)])
    let h = Harness(store: store) {
      $0.clock = clock
      $0.now = clock.dateSource
      $0.authorizationTimeout = .seconds(100)
    }
    clock.advance(by: .seconds(50))  // time passing before the call does not count
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(99))
    call.succeed(with: makeModel("new", clock: clock, expiresIn: 3600))
    #expect(try await caller.value.accessToken == "new")
  }
}
