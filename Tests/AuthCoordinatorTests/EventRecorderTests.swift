import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// The test kit's ``EventRecorder``: events are awaited, and a missing one fails the wait.
@Suite(.timeLimit(.minutes(2))) struct EventRecorderTests {
  @Test func anEventRecordedBeforeTheWaitStillCounts() async throws {
    let h = Harness()
    let events = EventRecorder(h.coordinator)
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    _ = try await caller.value
    try await events.first { $0.isFlightSucceeded }
    #expect(events.events.contains { if case .flightStarted = $0 { true } else { false } })
  }

  @Test func waitUntilRechecksTheConditionAfterEachEvent() async throws {
    let h = Harness()
    let events = EventRecorder(h.coordinator)
    let caller = h.request()
    let coordinator = h.coordinator
    let waiting = Task {
      try await events.waitUntil { coordinator.statistics.flightsSucceeded == 1 }
    }
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    try await waiting.value
    _ = try await caller.value
  }

  @Test func aMissingEventFailsTheWaitInsteadOfHanging() async throws {
    let h = Harness()
    let events = EventRecorder(h.coordinator, watchdog: .milliseconds(200))
    await #expect(throws: EventRecorder.WaitError.self) {
      try await events.first { $0.isFlightSucceeded }
    }
    await #expect(throws: EventRecorder.WaitError.self) {
      try await events.waitUntil { false }
    }
  }

  @Test func cancellingTheWaitEndsIt() async throws {
    let h = Harness()
    let events = EventRecorder(h.coordinator)
    let waiting = Task { try await events.first { $0.isFlightSucceeded } }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
  }
}
