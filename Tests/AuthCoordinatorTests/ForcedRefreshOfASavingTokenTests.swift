import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// A forced refresh of the token the flight in progress is saving waits for that flight to end
/// and then asks again (the machine's `retryAfter`): the entry point leaves this request in
/// the caller's variable for `settleSlowly`, with or without a deadline of the caller's own.
/// These run it through the public API with the save held, as a stuck store holds it.
@Suite struct ForcedRefreshOfASavingTokenTests {
  /// A flight that authorized t1 and holds in its save, its caller `first`, and a forced
  /// refresh rejecting t1, parked beside it.
  func forcedRefreshOfASavingToken(timeout: Duration? = nil) async throws -> (
    Harness, GatedStore, first: Task<AuthModel, any Error>, forced: Task<AuthModel, any Error>
  ) {
    let store = GatedStore()
    store.hold(.save)
    let h = Harness(store: store)
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    await store.waitForHeld(.save)
    let forced = h.request(refresh: .force(rejecting: "t1"), timeout: timeout)
    try await h.waitForWaiters(2)
    return (h, store, first, forced)
  }

  @Test func itWaitsForTheSaveAndThenAsksAgain() async throws {
    let (h, store, first, forced) = try await forcedRefreshOfASavingToken()
    #expect(h.authorizer.callCount == 1, "no new authorization while t1 is being saved")
    store.release(.save)
    #expect(try await first.value.accessToken == "t1")
    // Bounded: a caller served t1 again makes no second call, and this throws.
    try await h.authorizer.waitForCalls(2)
    await h.authorizer.nextCall().succeed(with: makeModel("t2"))
    #expect(try await forced.value.accessToken == "t2", "it asked again, rejecting t1")
    #expect(h.authorizer.callCount == 2)
  }

  @Test func aLogoutDuringTheWaitLeavesNoOneTheSignedOutToken() async throws {
    let (h, store, first, forced) = try await forcedRefreshOfASavingToken()
    // The logout ends the flight and its waiters at once; its removal waits for the save.
    let logout = Task { await h.coordinator.accountStatusChanged(.logout(account: "u1")) }
    // Bounded: a waiter that asked again would park on a new flight, and this throws.
    let coordinator = h.coordinator
    try await h.callers.waitUntil { coordinator.statistics.waitingCallers == 0 }
    await expectFailure(forced, .signedOut)
    await expectFailure(first, .signedOut)
    store.release(.save)
    await logout.value
    #expect(try await store.model(for: u1) == nil, "the save landed before the removal")
    #expect(h.authorizer.callCount == 1, "the waiter did not ask again for a signed-out user")
  }

  @Test func itsOwnDeadlineEndsTheWaitAndTheFlightGoesOn() async throws {
    // Parked, so its deadline is set (a timer armed after the clock moved wakes at once).
    let (h, store, first, forced) = try await forcedRefreshOfASavingToken(timeout: .seconds(2))
    h.clock.advance(by: .seconds(2))
    // Bounded: a caller whose deadline is ignored stays parked, and this throws.
    let coordinator = h.coordinator
    try await h.callers.waitUntil { coordinator.statistics.waitingCallers == 1 }
    await expectFailure(forced, .timedOut)
    store.release(.save)
    #expect(try await first.value.accessToken == "t1", "the flight went on for the others")
    #expect(h.authorizer.callCount == 1, "the caller that left asked nothing again")
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
  }
}
