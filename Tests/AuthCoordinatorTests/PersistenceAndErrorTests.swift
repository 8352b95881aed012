import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Rules 10-12: persist before resume, failures not cached, one error type with stable codes.
@Suite(.timeLimit(.minutes(2))) struct PersistenceAndErrorTests {
  // Rule 10
  @Test func waitersResumeOnlyAfterTheModelIsPersisted() async throws {
    let store = InstrumentedStore()
    let h = Harness(store: store)
    store.holdSaves()
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    await store.waitForHeldSaves(1)
    #expect(h.stats.waitingCallers == 1, "still parked while the save is held")
    #expect(h.stats.flightsSucceeded == 0)
    store.releaseSaves()
    #expect(try await caller.value.accessToken == "t1")
    #expect(await store.inner.model(for: u1)?.accessToken == "t1")
  }

  // Rule 10
  @Test func aStoreFailureDoesNotFailTheWaiters() async throws {
    let store = InstrumentedStore(failSaves: true)
    let h = Harness(store: store)
    var events = h.coordinator.events.makeAsyncIterator()
    let caller = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    #expect(try await caller.value.accessToken == "t1")
    #expect(h.stats.storeFailures == 1)
    while let event = await events.next() {
      if case .storeFailed(let key, let operation, let message) = event {
        #expect(key == u1)
        #expect(operation == .save)
        #expect(!message.contains("t1"))
        break
      }
    }
    // The model is still served from memory.
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
  }

  // Rule 10: an unreadable store is reported and treated as empty.
  @Test func aStoreReadFailureIsReportedAndTreatedAsEmpty() async throws {
    let store = InstrumentedStore([u1: makeModel("unreachable")], failReads: true)
    let h = Harness(store: store)
    let caller = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(with: makeModel("t1"))
    #expect(try await caller.value.accessToken == "t1")
    #expect(h.stats.storeFailures == 1)
  }

  // Rule 11
  @Test func failuresAreNotCached() async throws {
    let h = Harness()
    let first = (0..<3).map { _ in h.request() }
    let call = await h.authorizer.nextCall()
    try await h.waitForWaiters(3)
    call.fail(with: AuthCoordinatorError(.userCancelled, "cancel tapped"))
    for caller in first { await expectFailure(caller, .userCancelled) }
    let retry = h.request()
    let second = await h.authorizer.nextCall()
    second.succeed(with: makeModel("t1"))
    #expect(try await retry.value.accessToken == "t1")
    #expect(h.stats.flightsFailed == 1)
    #expect(h.stats.flightsSucceeded == 1)
  }

  // Rule 12
  @Test func foreignErrorsAreWrappedWithTheirCauseAttached() async throws {
    struct BackendDown: Error {}
    let h = Harness()
    let caller = h.request()
    await h.authorizer.nextCall().fail(with: BackendDown())
    do {
      _ = try await caller.value
      Issue.record("expected a failure")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .authorizationFailed)
      #expect(error.underlying is BackendDown)
    }
  }

  // Rule 12
  @Test func aModelForAnotherUserIsRefused() async throws {
    let h = Harness()
    let caller = h.request(u1)
    await h.authorizer.nextCall().succeed(with: makeModel("t", mcUid: "u2"))
    await expectFailure(caller, .authorizationFailed)
  }

  // Rule 12
  @Test func codesAreStableStringsAndEqualityIsByCode() {
    let expected: [(AuthCoordinatorError.Code, String)] = [
      (.timedOut, "timed_out"), (.authorizationFailed, "authorization_failed"),
      (.refreshLoop, "refresh_loop"), (.signedOut, "signed_out"),
      (.storeFailed, "store_failed"), (.abandoned, "abandoned"),
    ]
    for (code, raw) in expected { #expect(code.rawValue == raw) }
    #expect(Set(expected.map(\.0)).count == expected.count)
    #expect(AuthCoordinatorError(.timedOut, "a") == AuthCoordinatorError(.timedOut, "b"))
    #expect(AuthCoordinatorError(.timedOut) != AuthCoordinatorError(.signedOut))
    let error = AuthCoordinatorError(.storeFailed, "disk full", underlying: CancellationError())
    #expect(error.description.contains("store_failed"))
    #expect(error.description.contains("disk full"))
  }
}
