import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// Issue 13, items 4 and 5: an authorizer that never involves the user (a service's token
/// endpoint; ``Authorizer/isInteractive`` `false`) has one deadline, and the refresh-loop guard
/// delays its authorizations instead of failing every caller. Both failed before: the exchange
/// moved a silent authorizer to the 30 s exchange deadline, and the fourth forced refresh in a
/// minute failed with `refresh_loop`.
@Suite(.timeLimit(.minutes(1))) struct SilentAuthorizerTests {
  /// Warms `u1`, then forces three refreshes at t = 0: the guard's limit.
  func reachTheLimit(_ h: Harness) async throws {
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t0"))
    _ = try await warm.value
    for round in 1...3 {
      let forced = h.request(refresh: .force(rejecting: nil))
      await h.authorizer.nextCall().succeed(with: makeModel("t\(round)"))
      #expect(try await forced.value.accessToken == "t\(round)")
    }
  }

  @Test func aSilentAuthorizersExchangeKeepsTheAuthorizationDeadline() async throws {
    let h = Harness(silent: true) {
      $0.authorizationTimeout = .seconds(2)
      $0.exchangeTimeout = .seconds(30)
    }
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    call.beginExchange()
    await call.waitUntilInExchange()
    h.clock.advance(by: .seconds(2))
    await expectFailure(caller, .timedOut)
    #expect(h.stats.flightsTimedOut == 1)
  }

  @Test func anInteractiveAuthorizersExchangeStillHasItsOwnDeadline() async throws {
    let h = Harness {
      $0.authorizationTimeout = .seconds(2)
      $0.exchangeTimeout = .seconds(30)
    }
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    call.beginExchange()
    await call.waitUntilInExchange()
    h.clock.advance(by: .seconds(29))
    #expect(h.stats.flightsTimedOut == 0)
    h.clock.advance(by: .seconds(1))
    await expectFailure(caller, .timedOut)
  }

  @Test func theFourthForcedRefreshOfASilentAuthorizerWaitsInsteadOfFailing() async throws {
    let h = Harness(silent: true)
    try await reachTheLimit(h)
    let calls = h.authorizer.callCount
    let fourth = h.request(refresh: .force(rejecting: nil))
    let joiner = h.request(refresh: .force(rejecting: "t3"))
    try await h.waitForWaiters(2)
    #expect(h.authorizer.callCount == calls, "not before the back-off")
    h.clock.advance(by: .milliseconds(999))
    #expect(h.authorizer.callCount == calls)
    h.clock.advance(by: .milliseconds(1))  // loopBackoff, 1 s by default
    await h.authorizer.nextCall().succeed(with: makeModel("t4"))
    #expect(try await fourth.value.accessToken == "t4")
    #expect(try await joiner.value.accessToken == "t4", "one authorization for both")
    #expect(h.authorizer.callCount == calls + 1)
    #expect(h.stats.refreshLoopsStopped == 0)
    #expect(h.stats.refreshLoopBackoffs == 1)
  }

  @Test func theBackOffDoublesUpToItsLimit() async throws {
    let h = Harness(silent: true) {
      $0.loopBackoff = .seconds(1)
      $0.maxLoopBackoff = .seconds(3)
    }
    try await reachTheLimit(h)
    var delays: [Duration] = []
    var events = h.coordinator.events.makeAsyncIterator()
    for round in 4...6 {
      let forced = h.request(refresh: .force(rejecting: nil))
      while let event = await events.next() {
        if case .refreshLoopBackedOff(let key, let delay) = event {
          #expect(key == u1)
          delays.append(delay)
          break
        }
      }
      h.clock.advance(by: delays.last ?? .zero)
      await h.authorizer.nextCall().succeed(with: makeModel("t\(round)"))
      #expect(try await forced.value.accessToken == "t\(round)")
    }
    #expect(delays == [.seconds(1), .seconds(2), .seconds(3)])
    // Once the window has slid past every start, there is no delay again.
    h.clock.advance(by: .seconds(120))
    let calm = h.request(refresh: .force(rejecting: nil))
    await h.authorizer.nextCall().succeed(with: makeModel("t7"))
    #expect(try await calm.value.accessToken == "t7")
    #expect(h.stats.refreshLoopBackoffs == 3)
  }

  @Test func aCallerThatLeavesDuringTheBackOffStopsIt() async throws {
    let h = Harness(silent: true)
    try await reachTheLimit(h)
    let calls = h.authorizer.callCount
    let fourth = h.request(refresh: .force(rejecting: nil))
    try await h.waitForWaiters(1)
    fourth.cancel()
    await expectCancelled(fourth)
    h.clock.advance(by: .seconds(10))
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t3")
    #expect(h.authorizer.callCount == calls, "the stopped back-off authorized nothing")
  }

  @Test func aLogoutDuringTheBackOffSignsTheCallersOut() async throws {
    let h = Harness(silent: true)
    try await reachTheLimit(h)
    let calls = h.authorizer.callCount
    let fourth = h.request(refresh: .force(rejecting: nil))
    try await h.waitForWaiters(1)
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    await expectFailure(fourth, .signedOut)
    h.clock.advance(by: .seconds(10))
    #expect(h.authorizer.callCount == calls)
  }

  @Test func anInteractiveAuthorizerStillFailsFast() async throws {
    let h = Harness()
    try await reachTheLimit(h)
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: nil))
    }
    #expect(h.stats.refreshLoopBackoffs == 0)
  }

  @Test func everyKnobIsInTheInitializer() {
    let configuration = AuthCoordinator.Configuration(
      authorizationTimeout: .seconds(2), exchangeTimeout: .seconds(3),
      refreshLeeway: .seconds(4), maxForcedAuthorizations: 5, loopWindow: .seconds(6),
      loopBackoff: .seconds(7), maxLoopBackoff: .seconds(8), maxIdleKeys: 9,
      whenAbandoned: .finishAndCache, storeTimeout: .seconds(10), leaseTimeToLive: .seconds(11),
      allowsInteraction: false)
    #expect(configuration.authorizationTimeout == .seconds(2))
    #expect(configuration.exchangeTimeout == .seconds(3))
    #expect(configuration.refreshLeeway == .seconds(4))
    #expect(configuration.maxForcedAuthorizations == 5)
    #expect(configuration.loopWindow == .seconds(6))
    #expect(configuration.loopBackoff == .seconds(7))
    #expect(configuration.maxLoopBackoff == .seconds(8))
    #expect(configuration.maxIdleKeys == 9)
    #expect(configuration.whenAbandoned == .finishAndCache)
    #expect(configuration.storeTimeout == .seconds(10))
    #expect(configuration.leaseTimeToLive == .seconds(11))
    #expect(!configuration.allowsInteraction)
  }
}
