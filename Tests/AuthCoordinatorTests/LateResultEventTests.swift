import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// `AuthEvent.lateResultDiscarded` documents results of flights that were timed out, cancelled
/// or signed out. A result that arrived after its flight was already stopped moved the counter
/// but emitted no event (found while converting the tests' polls to awaited events).
@Suite(.timeLimit(.minutes(1))) struct LateResultEventTests {
  @Test func aResultAfterLogoutIsReportedAsAnEvent() async throws {
    let h = Harness(ignoresCancellation: true)
    let recorder = EventRecorder(h.coordinator, watchdog: .seconds(20))
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    await h.coordinator.accountStatusChanged(.logout(account: "u1"))
    await expectFailure(caller, .signedOut)

    call.succeed(with: makeModel("late"))
    let event = try await recorder.first {
      if case .lateResultDiscarded = $0 { return true } else { return false }
    }
    #expect(event == .lateResultDiscarded(key: u1, flight: 1))
    #expect(h.stats.lateResultsDiscarded == 1)
  }

  @Test func aResultAfterTheDeadlineIsReportedAsAnEvent() async throws {
    let h = Harness(ignoresCancellation: true) { $0.authorizationTimeout = .seconds(10) }
    let recorder = EventRecorder(h.coordinator, watchdog: .seconds(20))
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(10))
    await expectFailure(caller, .timedOut)

    call.succeed(with: makeModel("late"))
    try await recorder.first {
      if case .lateResultDiscarded(u1, _) = $0 { return true } else { return false }
    }
    #expect(h.stats.lateResultsDiscarded == 1)
  }
}
