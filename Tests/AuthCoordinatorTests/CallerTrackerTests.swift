import AuthCoordinator
import AuthCoordinatorTestKit
import SyncPrimitives
import Testing

/// The test kit's ``CallerTracker`` and ``ChangeSignal``: a condition is awaited, never polled,
/// and one that never holds fails the wait instead of hanging.
@Suite(.timeLimit(.minutes(2))) struct CallerTrackerTests {
  @Test func aWaitForParkedCallersEndsOnceTheyAllParked() async throws {
    let h = Harness()
    let callers = (0..<500).map { _ in h.request() }
    let call = await h.authorizer.nextCall()
    try await h.waitForWaiters(500)
    #expect(h.stats.waitingCallers == 500)
    call.succeed(with: makeModel("t1"))
    for caller in callers { #expect(try await caller.value.accessToken == "t1") }
  }

  @Test func childTasksOfATrackedOperationAreTracked() async throws {
    let h = Harness()
    let coordinator = h.coordinator
    try await h.callers.withTracking {
      try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<200 { group.addTask { try await coordinator.authModel(for: u1).accessToken } }
        let call = await h.authorizer.nextCall()
        try await h.waitForWaiters(200)
        call.succeed(with: makeModel("t1"))
        for try await token in group { #expect(token == "t1") }
      }
    }
  }

  @Test func callersThatNeverParkFailTheWaitInsteadOfHanging() async throws {
    let h = Harness()
    let callers = CallerTracker(watchdog: .milliseconds(200))
    let coordinator = h.coordinator
    let tasks = (0..<2).map { _ in callers.task { try await coordinator.authModel(for: u1) } }
    let call = await h.authorizer.nextCall()
    try await callers.waitUntil { coordinator.statistics.waitingCallers == 2 }
    await #expect(throws: ChangeSignal.WaitError.self) {
      try await callers.waitUntil { coordinator.statistics.waitingCallers == 3 }
    }
    call.succeed(with: makeModel("t1"))
    for task in tasks { _ = try await task.value }
  }

  @Test func aChangeSignalChecksAgainOnEveryChange() async throws {
    let signal = ChangeSignal()
    let value = LockedState(0)
    let waiting = Task { try await signal.waitUntil { value.withLock { $0 } == 3 } }
    for _ in 0..<3 {
      value.withLock { $0 += 1 }
      signal.changed()
    }
    try await waiting.value
    try await signal.waitUntil { value.withLock { $0 } == 3 }  // already true: returns at once
  }

  @Test func aChangeThatNeverComesFailsTheWait() async throws {
    let signal = ChangeSignal(watchdog: .milliseconds(200))
    await #expect(throws: ChangeSignal.WaitError.self) { try await signal.waitUntil { false } }
    let waiting = Task { try await ChangeSignal().waitUntil { false } }
    waiting.cancel()
    await #expect(throws: CancellationError.self) { try await waiting.value }
  }
}
