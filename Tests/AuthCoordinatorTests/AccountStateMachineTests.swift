import Foundation
import Testing

@testable import AuthCoordinator

/// The per-key decisions, tested synchronously: no tasks, no clocks, only events and actions.
@Suite struct AccountStateMachineTests {
  let date = Date(timeIntervalSince1970: 1_800_000_000)
  let policy = AccountStateMachine.Policy(
    refreshLeeway: 60, maxForcedAuthorizations: 3, loopWindow: .seconds(60),
    whenAbandoned: .cancel)

  func model(_ token: String, expiresIn: TimeInterval? = 3600) -> AuthModel {
    AuthModel(
      uid: "2088", accessToken: token, mcUid: "u1",
      expiresAt: expiresIn.map { date.addingTimeInterval($0) })
  }

  /// A machine whose cache holds `model` (loaded from the store in flight 1).
  func machine(holding model: AuthModel?, policy: AccountStateMachine.Policy? = nil)
    -> AccountStateMachine
  {
    var machine = AccountStateMachine(policy: policy ?? self.policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    let action = machine.loaded(1, model: model, date: date, now: .zero)
    if let model, model.isValid(at: date, leeway: 60) {
      #expect(action == .complete(model))
    } else {
      // Not servable: the load flight went on to authorize; fail it to get back to idle.
      #expect(machine.authorized(1, result: .failure(.init(.authorizationFailed))) == .fail)
    }
    return machine
  }

  @Test func coldRequestStartsALoad() {
    var machine = AccountStateMachine(policy: policy)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 7) == .start(flight: 7, .load)
    )
    #expect(machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 8) == .join(flight: 7))
  }

  @Test func loadServesAValidStoredModel() {
    var machine = AccountStateMachine(policy: policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(machine.loaded(1, model: model("t1"), date: date, now: .zero) == .complete(model("t1")))
    #expect(machine.isIdle)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2) == .serve(model("t1")))
  }

  @Test func loadOfMissingOrExpiredModelContinuesToAuthorizeInTheSameFlight() {
    var empty = AccountStateMachine(policy: policy)
    _ = empty.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(empty.loaded(1, model: nil, date: date, now: .zero) == .authorize(.missing))
    #expect(empty.flight?.id == 1)

    var expired = AccountStateMachine(policy: policy)
    _ = expired.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      expired.loaded(1, model: model("t0", expiresIn: 30), date: date, now: .zero)
        == .authorize(.expired))
  }

  @Test func modelWithinTheLeewayCountsAsExpired() {
    var machine = self.machine(holding: model("t1", expiresIn: 61))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .serve(model("t1", expiresIn: 61)))
    let later = date.addingTimeInterval(2)
    #expect(
      machine.request(.ifNeeded, date: later, now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.expired)))
  }

  @Test func authorizationPersistsThenCompletes() {
    var machine = self.machine(holding: nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.missing)))
    #expect(machine.authorized(2, result: .success(model("t2"))) == .persist(model("t2")))
    #expect(machine.cachedModel == nil, "the model is cached only once persisted")
    #expect(machine.persisted(2, date: date) == .complete(model("t2")))
    #expect(machine.cachedModel == model("t2"))
    #expect(machine.isIdle)
  }

  @Test func failureIsNotCached() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(machine.authorized(2, result: .failure(.init(.userCancelled))) == .fail)
    #expect(machine.cache == .empty)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, .authorize(.missing)))
  }

  @Test func staleEventsAreDiscarded() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(machine.authorized(99, result: .success(model("x"))) == .discard)
    #expect(machine.loaded(99, model: model("x"), date: date, now: .zero) == .discard)
    #expect(machine.persisted(99, date: date) == .discard)
    #expect(machine.deadlineReached(99, phase: .authorization, date: date) == .ignore)
    #expect(
      machine.lastWaiterLeft(
        99,
        closeQueue: {
          Issue.record("stale: no close")
          return true
        }) == .ignore)
  }

  @Test func deadlineStopsOnlyAnAuthorizingFlight() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(machine.deadlineReached(2, phase: .authorization, date: date) == .stop)
    #expect(machine.isIdle)
    // A result that arrives after the deadline is discarded.
    #expect(machine.authorized(2, result: .success(model("late"))) == .discard)
    #expect(machine.cachedModel == nil)
    // The next request starts a new flight.
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, .authorize(.missing)))
    _ = machine.authorized(3, result: .success(model("t3")))
    #expect(
      machine.deadlineReached(3, phase: .authorization, date: date) == .ignore,
      "an authorization deadline does not apply to a persisting flight")
  }

  @Test func forcedRefreshServesADifferentValidToken() {
    var machine = self.machine(holding: model("t2"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 2)
        == .serve(model("t2")))
  }

  @Test func forcedRefreshOfTheCachedTokenAuthorizes() {
    var machine = self.machine(holding: model("t1"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.forcedRefresh)))
    // Others rejecting the same token, or naming none, join.
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 3)
        == .join(flight: 2))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 3)
        == .join(flight: 2))
    // Ordinary requests are still served the cached model: only the container rejected it.
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3) == .serve(model("t1")))
  }

  @Test func forcedRefreshWithoutATokenRejectsTheCachedOne() {
    var machine = self.machine(holding: model("t1"))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.forcedRefresh)))
  }

  @Test func forcedRefreshNeverJoinsALoadThatCanOnlyReturnTheRejectedToken() {
    var machine = AccountStateMachine(policy: policy)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1) == .start(flight: 1, .load)
    )
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 2)
        == .join(flight: 1))
    // The store holds the rejected token: the same flight goes on to authorize.
    #expect(
      machine.loaded(1, model: model("t1"), date: date, now: .zero) == .authorize(.forcedRefresh))
  }

  @Test func forcedRefreshOnAColdKeyWithoutATokenRejectsTheStoredModel() {
    var machine = AccountStateMachine(policy: policy)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 1)
        == .start(flight: 1, .load))
    #expect(
      machine.loaded(1, model: model("t1"), date: date, now: .zero) == .authorize(.forcedRefresh))
  }

  @Test func loadOfADifferentTokenServesForcedJoiners() {
    var machine = AccountStateMachine(policy: policy)
    _ = machine.request(.force(rejecting: "old"), date: date, now: .zero, newFlightID: 1)
    #expect(machine.loaded(1, model: model("t1"), date: date, now: .zero) == .complete(model("t1")))
  }

  @Test func forcedRefreshOfThePersistingTokenWaitsForTheFlightToEnd() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.authorized(2, result: .success(model("t2")))
    #expect(
      machine.request(.force(rejecting: "t2"), date: date, now: .zero, newFlightID: 3)
        == .retryAfter(flight: 2, rejecting: "t2"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 3)
        == .join(flight: 2))
  }

  @Test func loopGuardRefusesTheFourthForcedAuthorizationInTheWindow() {
    var machine = self.machine(holding: model("t0"))
    for round in 1...3 {
      let id = UInt64(round + 1)
      let now = Duration.seconds(round * 10)
      #expect(
        machine.request(.force(rejecting: nil), date: date, now: now, newFlightID: id)
          == .start(flight: id, .authorize(.forcedRefresh)))
      _ = machine.authorized(id, result: .success(model("t\(round)")))
      _ = machine.persisted(id, date: date)
    }
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(40), newFlightID: 9)
        == .refuse(.refreshLoop))
    // The window slides: at 70 s the start at 10 s has left it.
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(70.5), newFlightID: 9)
        == .start(flight: 9, .authorize(.forcedRefresh)))
  }

  @Test func loopGuardDoesNotCountJoinsOrOrdinaryAuthorizations() {
    var machine = self.machine(holding: model("t0", expiresIn: 1))
    // Ordinary (expired) authorizations are not counted.
    for id in UInt64(2)...6 {
      _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: id)
      _ = machine.authorized(id, result: .failure(.init(.authorizationFailed)))
    }
    #expect(machine.forcedStarts.isEmpty)
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 7)
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 8)
    #expect(machine.forcedStarts.count == 1, "a join starts no authorization")
  }

  @Test func loopGuardCanStopALoadThatNeedsAForcedAuthorization() {
    var machine = self.machine(holding: model("t0"))
    for id in UInt64(2)...4 {
      _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: id)
      _ = machine.authorized(id, result: .failure(.init(.authorizationFailed)))
    }
    // Pretend the key was evicted and reloaded while the history is kept in the same value.
    var cold = AccountStateMachine(
      policy: AccountStateMachine.Policy(
        refreshLeeway: 60, maxForcedAuthorizations: 0, loopWindow: .seconds(60),
        whenAbandoned: .cancel))
    _ = cold.request(.force(rejecting: "t0"), date: date, now: .zero, newFlightID: 1)
    #expect(cold.loaded(1, model: model("t0"), date: date, now: .zero) == .fail(.refreshLoop))
    #expect(cold.isIdle)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 5)
        == .refuse(.refreshLoop))
  }

  @Test func lastWaiterLeavingCancelsOrKeepsRunningByPolicy() {
    var cancel = self.machine(holding: nil)
    _ = cancel.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(cancel.lastWaiterLeft(99, closeQueue: { true }) == .ignore)
    #expect(cancel.lastWaiterLeft(2, closeQueue: { true }) == .stop)
    #expect(cancel.isIdle)

    var keep = self.machine(
      holding: nil,
      policy: .init(
        refreshLeeway: 60, maxForcedAuthorizations: 3, loopWindow: .seconds(60),
        whenAbandoned: .finishAndCache))
    _ = keep.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    var asked = false
    #expect(
      keep.lastWaiterLeft(
        2,
        closeQueue: {
          asked = true
          return true
        }) == .keepRunning)
    #expect(!asked, "a flight that keeps running never closes its queue")
    #expect(keep.authorized(2, result: .success(model("t2"))) == .persist(model("t2")))
  }

  /// A caller joined (through the hot cache) after the last one left: the queue cannot be closed,
  /// so the flight runs on for it.
  @Test func anAbandonedFlightWhoseQueueGotAJoinerKeepsRunning() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(machine.lastWaiterLeft(2, closeQueue: { false }) == .keepRunning)
    #expect(machine.flight?.id == 2)
    #expect(machine.authorized(2, result: .success(model("t2"))) == .persist(model("t2")))
  }

  @Test func signOutCancelsTheFlightAndForgetsEverything() {
    var machine = self.machine(holding: model("t1"))
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
    #expect(machine.signOut() == 2)
    #expect(machine.cache == .empty)
    #expect(machine.forcedStarts.isEmpty)
    #expect(machine.authorized(2, result: .success(model("late"))) == .discard)
    #expect(machine.cachedModel == nil)
    #expect(machine.signOut() == nil)
  }

  @Test func signOutDuringPersistDiscardsTheModel() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.authorized(2, result: .success(model("t2")))
    #expect(machine.signOut() == 2)
    #expect(machine.persisted(2, date: date) == .discard)
    #expect(machine.cachedModel == nil)
  }
}

extension AccountStateMachineTests {
  @Test func aForcedRefreshOnAnEmptyColdKeyCountsForTheLoopGuard() {
    var machine = AccountStateMachine(
      policy: .init(
        refreshLeeway: 60, maxForcedAuthorizations: 0, loopWindow: .seconds(60),
        whenAbandoned: .cancel))
    _ = machine.request(.force(rejecting: "x"), date: date, now: .zero, newFlightID: 1)
    #expect(machine.loaded(1, model: nil, date: date, now: .zero) == .fail(.refreshLoop))

    var counted = AccountStateMachine(policy: policy)
    _ = counted.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = counted.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
    #expect(counted.loaded(1, model: nil, date: date, now: .zero) == .authorize(.missing))
    #expect(counted.forcedStarts.count == 1)
  }
}

/// The decisions added for the defects of the outside review: store deadlines, short-lived
/// models, eviction and the loop guard, a save that outlives its callers.
@Suite struct AccountStateMachineDeadlineAndLeewayTests {
  let date = Date(timeIntervalSince1970: 1_800_000_000)
  let policy = AccountStateMachine.Policy(
    refreshLeeway: 60, maxForcedAuthorizations: 3, loopWindow: .seconds(60),
    whenAbandoned: .cancel)

  func model(_ token: String, expiresIn: TimeInterval) -> AuthModel {
    AuthModel(
      uid: "2088", accessToken: token, mcUid: "u1", expiresAt: date.addingTimeInterval(expiresIn))
  }

  /// A machine that authorized `model` in flight 1 (a missing key) and cached it at `date`.
  func machine(cachedFromAuthorization model: AuthModel) -> AccountStateMachine {
    var machine = AccountStateMachine(policy: policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.loaded(1, model: nil, date: date, now: .zero)
    _ = machine.authorized(1, result: .success(model))
    #expect(machine.persisted(1, date: date) == .complete(model))
    return machine
  }

  @Test func theLeewayIsAtMostHalfTheLifetimeAModelArrivedWith() {
    typealias M = AccountStateMachine
    #expect(M.leeway(60, forModelExpiring: nil, obtainedAt: date) == 60)
    #expect(M.leeway(60, forModelExpiring: date.addingTimeInterval(3600), obtainedAt: date) == 60)
    #expect(M.leeway(60, forModelExpiring: date.addingTimeInterval(100), obtainedAt: date) == 50)
    #expect(M.leeway(60, forModelExpiring: date.addingTimeInterval(30), obtainedAt: date) == 15)
    #expect(M.leeway(60, forModelExpiring: date.addingTimeInterval(-5), obtainedAt: date) == 0)
  }

  @Test func aShortLivedModelIsServedThenItsRenewalCountsForTheLoopGuard() {
    var machine = self.machine(cachedFromAuthorization: model("t1", expiresIn: 30))
    #expect(machine.cacheArrivedInsideLeeway)
    #expect(
      machine.request(.ifNeeded, date: date.addingTimeInterval(14), now: .zero, newFlightID: 2)
        == .serve(model("t1", expiresIn: 30)))
    #expect(
      machine.request(.ifNeeded, date: date.addingTimeInterval(16), now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.expired)))
    #expect(machine.forcedStarts == [.zero], "the renewal was counted")
  }

  @Test func aLongLivedModelsRenewalIsNotCounted() {
    var machine = self.machine(cachedFromAuthorization: model("t1", expiresIn: 3600))
    #expect(!machine.cacheArrivedInsideLeeway)
    #expect(
      machine.request(.ifNeeded, date: date.addingTimeInterval(3550), now: .zero, newFlightID: 2)
        == .start(flight: 2, .authorize(.expired)))
    #expect(machine.forcedStarts.isEmpty)
  }

  @Test func eachDeadlineAppliesOnlyToItsOwnPhase() {
    var machine = AccountStateMachine(policy: policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(machine.deadlineReached(1, phase: .authorization, date: date) == .ignore)
    #expect(machine.deadlineReached(1, phase: .save, date: date) == .ignore)
    #expect(machine.deadlineReached(1, phase: .load, date: date) == .failLoad)
    #expect(machine.isIdle)
    #expect(machine.cache == .unknown, "the next request reads the store again")

    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.loaded(2, model: nil, date: date, now: .zero)
    #expect(machine.deadlineReached(2, phase: .load, date: date) == .ignore)
    _ = machine.authorized(2, result: .success(model("t2", expiresIn: 3600)))
    #expect(machine.deadlineReached(2, phase: .authorization, date: date) == .ignore)
    #expect(
      machine.deadlineReached(2, phase: .save, date: date)
        == .complete(model("t2", expiresIn: 3600)))
    #expect(machine.cachedModel == model("t2", expiresIn: 3600), "a stuck save still caches")
    #expect(machine.persisted(2, date: date) == .discard, "the late save changes nothing")
  }

  @Test func theLastWaiterLeavingDuringTheSaveKeepsTheFlight() {
    var machine = AccountStateMachine(policy: policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.loaded(1, model: nil, date: date, now: .zero)
    _ = machine.authorized(1, result: .success(model("t1", expiresIn: 3600)))
    #expect(
      machine.lastWaiterLeft(
        1,
        closeQueue: {
          Issue.record("the queue stays open: the model is already obtained")
          return true
        }) == .keepRunning)
    #expect(machine.persisted(1, date: date) == .complete(model("t1", expiresIn: 3600)))
  }

  @Test func aKeyWithAuthorizationsInTheLoopWindowIsNotEvictable() {
    var machine = self.machine(cachedFromAuthorization: model("t1", expiresIn: 3600))
    #expect(machine.isEvictable(now: .zero))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(10), newFlightID: 2)
        == .start(flight: 2, .authorize(.forcedRefresh)))
    _ = machine.authorized(2, result: .success(model("t2", expiresIn: 3600)))
    _ = machine.persisted(2, date: date)
    #expect(!machine.isEvictable(now: .seconds(69)))
    #expect(machine.isEvictable(now: .seconds(70)))
  }
}
