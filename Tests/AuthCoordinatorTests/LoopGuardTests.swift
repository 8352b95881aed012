import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// Rule 6: the refresh-loop guard.
@Suite(.timeLimit(.minutes(2))) struct LoopGuardTests {
  /// Obtains a model through one forced authorization.
  func forcedRound(_ h: Harness, token: String) async throws -> AuthModel {
    let forced = h.request(refresh: .force(rejecting: nil))
    await h.authorizer.nextCall().succeed(with: makeModel(token))
    return try await forced.value
  }

  @Test func theFourthForcedAuthorizationInTheWindowFailsFast() async throws {
    let h = Harness()
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t0"))
    _ = try await warm.value
    for round in 1...3 {
      h.clock.advance(by: .seconds(5))
      #expect(try await forcedRound(h, token: "t\(round)").accessToken == "t\(round)")
    }
    let calls = h.authorizer.callCount
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: nil))
    }
    #expect(h.authorizer.callCount == calls, "the authorizer was not called")
    #expect(h.stats.refreshLoopsStopped == 1)
    // Ordinary requests still get the cached model.
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t3")
  }

  @Test func theWindowSlidesOnTheInjectedClock() async throws {
    let h = Harness { $0.loopWindow = .seconds(60) }
    let warm = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t0"))
    _ = try await warm.value
    for round in 1...3 { _ = try await forcedRound(h, token: "t\(round)") }  // all at t = 0
    h.clock.advance(by: .seconds(59))
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: nil))
    }
    h.clock.advance(by: .seconds(2))  // the three starts at t = 0 left the window
    #expect(try await forcedRound(h, token: "t4").accessToken == "t4")
  }

  @Test func theLimitIsConfigurableAndPerKey() async throws {
    let h = Harness { $0.maxForcedAuthorizations = 1 }
    for key in [u1, u2] {
      let warm = h.request(key)
      await h.authorizer.nextCall().succeed(with: makeModel("w-\(key.account)", mcUid: key.account))
      _ = try await warm.value
    }
    let first = h.request(u1, refresh: .force(rejecting: nil))
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await first.value
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: nil))
    }
    // u2 has its own window.
    let other = h.request(u2, refresh: .force(rejecting: nil))
    await h.authorizer.nextCall().succeed(with: makeModel("t2", mcUid: "u2"))
    #expect(try await other.value.accessToken == "t2")
  }

  @Test func aLoopStopIsReportedAsAnEvent() async throws {
    let h = Harness { $0.maxForcedAuthorizations = 0 }
    var events = h.coordinator.events.makeAsyncIterator()
    await #expect(throws: AuthCoordinatorError(.refreshLoop)) {
      try await h.coordinator.authModel(for: u1, refresh: .force(rejecting: "x"))
    }
    var sawStop = false
    while let event = await events.next() {
      if case .refreshLoopStopped(let key) = event {
        #expect(key == u1)
        sawStop = true
        break
      }
    }
    #expect(sawStop)
  }
}
