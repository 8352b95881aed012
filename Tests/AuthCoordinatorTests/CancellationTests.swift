import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

/// Rule 7: per-caller cancellation, arrival order, abandonment of a flight.
@Suite(.timeLimit(.minutes(2))) struct CancellationTests {
  @Test func aCancelledCallerLeavesAtOnceAndTheFlightGoesOn() async throws {
    let h = Harness()
    let staying = h.request()
    let call = await h.authorizer.nextCall()
    let leaving = h.request()
    try await h.waitForWaiters(2)
    leaving.cancel()
    await expectCancelled(leaving)
    #expect(!call.isCancelled)
    #expect(h.stats.callersLeftEarly == 1)
    call.succeed(with: makeModel("t1"))
    #expect(try await staying.value.accessToken == "t1")
    #expect(h.stats.flightsSucceeded == 1)
  }

  @Test func aCallerCancelledBeforeItArrivesNeverWaits() async throws {
    let h = Harness()
    let coordinator = h.coordinator
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await coordinator.authModel(for: u1)
    }
    await expectCancelled(task)
    #expect(h.authorizer.callCount == 0)
  }

  @Test func whenTheLastWaiterLeavesTheFlightIsCancelled() async throws {
    let h = Harness()
    let only = h.request()
    let call = await h.authorizer.nextCall()
    let events = EventRecorder(h.coordinator)
    only.cancel()
    await expectCancelled(only)
    try await events.first { $0.isFlightCancelled(.lastWaiterLeft) }
    // The coordinator counts the stop before it cancels the authorizer's task.
    await call.waitUntilCancelled()
    #expect(h.stats.flightsCancelled == 1)
    #expect(h.stats.flightsInProgress == 0)

    // The cancellation does not leak into a later caller: it starts a new flight.
    let later = h.request()
    let second = await h.authorizer.nextCall()
    second.succeed(with: makeModel("t2"))
    #expect(try await later.value.accessToken == "t2")
  }

  @Test func aJoinerArrivingAfterTheLastLeftStartsFresh() async throws {
    let h = Harness(ignoresCancellation: true)
    let only = h.request()
    let call = await h.authorizer.nextCall()
    let events = EventRecorder(h.coordinator)
    only.cancel()
    await expectCancelled(only)
    // The flight is stopped (and counted) before the event is emitted; `later` arrives after.
    try await events.first { $0.isFlightCancelled(.lastWaiterLeft) }
    let later = h.request()
    let second = await h.authorizer.nextCall()
    #expect(h.stats.flightsCancelled == 1)
    // The abandoned authorizer answers late: discarded.
    call.succeed(with: makeModel("stale"))
    second.succeed(with: makeModel("fresh"))
    #expect(try await later.value.accessToken == "fresh")
    // The discard is an event, emitted after it was counted.
    try await events.first { $0.isLateResultDiscarded }
    #expect(h.stats.lateResultsDiscarded == 1)
  }

  @Test func finishAndCacheKeepsAnAbandonedFlightRunning() async throws {
    let h = Harness { $0.whenAbandoned = .finishAndCache }
    let only = h.request()
    let call = await h.authorizer.nextCall()
    only.cancel()
    await expectCancelled(only)
    #expect(!call.isCancelled)
    let events = EventRecorder(h.coordinator)
    call.succeed(with: makeModel("kept"))
    // Emitted after the flight was counted and its model cached.
    try await events.first { $0.isFlightSucceeded }
    #expect(h.stats.flightsSucceeded == 1)
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "kept")
    #expect(h.authorizer.callCount == 1)
  }

  @Test func aCallersOwnTimeoutAffectsOnlyThatCaller() async throws {
    let h = Harness()
    let patient = h.request()
    let call = await h.authorizer.nextCall()
    let hurried = h.request(timeout: .seconds(10))
    try await h.waitForWaiters(2)
    await h.clock.waitForSleepers(2)  // the flight's deadline and the caller's timer
    h.clock.advance(by: .seconds(11))
    await expectFailure(hurried, .timedOut)
    #expect(!call.isCancelled)
    call.succeed(with: makeModel("t1"))
    #expect(try await patient.value.accessToken == "t1")
  }

  @Test func aLoneCallersTimeoutAbandonsTheFlight() async throws {
    let h = Harness()
    let hurried = h.request(timeout: .seconds(10))
    let call = await h.authorizer.nextCall()
    await h.clock.waitForSleepers(2)
    let events = EventRecorder(h.coordinator)
    h.clock.advance(by: .seconds(10))
    await expectFailure(hurried, .timedOut)
    try await events.first { $0.isFlightCancelled(.lastWaiterLeft) }
    // The coordinator counts the stop before it cancels the authorizer's task.
    await call.waitUntilCancelled()
    #expect(h.stats.flightsCancelled == 1)
  }

  @Test func cancellingHalfOfManyWaitersLeavesTheOtherHalfServed() async throws {
    let h = Harness()
    let n = 2_000
    let tasks = (0..<n).map { _ in h.request() }
    let call = await h.authorizer.nextCall()
    try await h.waitForWaiters(n)
    let leaving = tasks.enumerated().filter { $0.offset.isMultiple(of: 2) }.map(\.element)
    for task in leaving { task.cancel() }
    // A caller leaving a flight that others still wait on emits no event; it returns at once,
    // while the flight goes on: await the cancelled callers themselves.
    for task in leaving { await expectCancelled(task) }
    #expect(h.stats.callersLeftEarly == n / 2)
    #expect(h.stats.waitingCallers == n / 2)
    #expect(!call.isCancelled, "the flight goes on for the other half")
    call.succeed(with: makeModel("t1"))
    for (index, task) in tasks.enumerated() where !index.isMultiple(of: 2) {
      #expect(try await task.value.accessToken == "t1")
    }
    #expect(h.authorizer.callCount == 1)
  }
}
