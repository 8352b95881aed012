import Foundation
import Testing

@testable import AuthCoordinator

/// Forced refreshes (a container rejected a token), the refresh-loop guard that bounds them,
/// short-lived models, and eviction.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineForcedRefreshTests: StateMachineFixture {
  @Test func aForcedRefreshOfAnotherTokenIsServedTheValidCachedOne() {
    var machine = self.machine(holding: model("t2"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t2")))
  }

  @Test func aForcedRefreshOfTheCachedTokenAuthorizes() {
    var machine = self.machine(holding: model("t1"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .seconds(2), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(9))))
    // Others rejecting the same token, or naming none, join.
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: 2))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: 2))
    // Ordinary requests are still served the cached model: only the container rejected it.
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t1")))
    // The store still holds the rejected token: the flight authorizes, replacing it.
    #expect(
      machine.advance(2, .loaded(model("t1")), date: date, now: .seconds(3))
        == .next(authorize(.forcedRefresh, by: .seconds(123), replacing: model("t1"))))
  }

  @Test func aForcedRefreshNamingNoTokenRejectsTheCachedOne() {
    var machine = self.machine(holding: model("t1"))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(model("t1")), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: model("t1"))))
  }

  @Test func aForcedRefreshOfAnEmptyWarmKeyAuthorizesAndCounts() {
    var machine = self.machine(holding: nil, policy: policy(maxForced: 1))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120))))
    _ = machine.advance(2, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(1), newFlightID: 3)
        == .refuse(.init(.refreshLoop)))
  }

  @Test func aForcedJoinerOfALoadThatReturnsTheRejectedTokenAuthorizesInTheSameFlight() {
    var machine = coldMachine()
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: 1))
    #expect(
      machine.advance(1, .loaded(model("t1")), date: date, now: .seconds(4))
        == .next(authorize(.forcedRefresh, by: .seconds(124), replacing: model("t1"))))
    #expect(machine.cachedModel == model("t1"))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t1")), "ordinary requests are served the rejected token meanwhile")
  }

  @Test func aForcedJoinerOfALoadOfAnotherTokenIsServedIt() {
    var machine = coldMachine()
    #expect(
      machine.request(.force(rejecting: "old"), date: date, now: .zero, newFlightID: 1)
        == .start(flight: 1, load(by: .seconds(7))))
    #expect(
      machine.advance(1, .loaded(model("t1")), date: date, now: .zero)
        == .end(Ending(flight: 1, result: .succeeded(model("t1")))))
  }

  @Test func aForcedRefreshOnAColdKeyNamingNoTokenRejectsTheStoredModel() {
    var machine = coldMachine()
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 1)
        == .start(flight: 1, load(by: .seconds(7))))
    #expect(
      machine.advance(1, .loaded(model("t1")), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: model("t1"))))
  }

  @Test func aForcedRefreshOfAnEmptyColdKeyAuthorizesAMissingModelAndCounts() {
    var machine = coldMachine(policy(maxForced: 1))
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: noNewFlight())
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.missing, by: .seconds(120))))
    _ = machine.advance(1, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(1), newFlightID: 2)
        == .refuse(.init(.refreshLoop)), "the load's authorization was counted")

    var refused = coldMachine(policy(maxForced: 0))
    _ = refused.request(.force(rejecting: "x"), date: date, now: .zero, newFlightID: 1)
    #expect(
      refused.advance(1, .loaded(nil), date: date, now: .zero)
        == .end(
          Ending(flight: 1, result: .failed(.init(.refreshLoop)), refusedByLoopGuard: true)))
  }

  @Test func aForcedRefreshOfThePersistingTokenWaitsForTheFlightToEnd() {
    var (machine, id) = self.machine(in: .persisting)
    #expect(
      machine.request(.force(rejecting: "t2"), date: date, now: .zero, newFlightID: noNewFlight())
        == .retryAfter(flight: id, rejecting: "t2"))
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: id))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: id), "nothing was cached to reject: the new model will do")
    // The flight ends normally; the followers ask again, and now the token is cached.
    #expect(
      machine.advance(id, .saved, date: date, now: .zero)
        == .end(Ending(flight: id, result: .succeeded(model("t2")), followers: .askAgain)))
    #expect(
      machine.request(.force(rejecting: "t2"), date: date, now: .seconds(1), newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(8))))
    #expect(
      machine.advance(3, .loaded(model("t2")), date: date, now: .seconds(2))
        == .next(authorize(.forcedRefresh, by: .seconds(122), replacing: model("t2"))))
  }

  @Test func aForcedRefreshJoinsAnAuthorizationInProgress() {
    var (machine, id) = self.machine(in: .authorizing)
    #expect(
      machine.request(.force(rejecting: "t9"), date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: id))
  }

  // MARK: - The refresh-loop guard

  @Test func theLoopGuardRefusesTheFourthForcedAuthorizationInTheWindow() {
    var machine = self.machine(holding: model("t0"))
    for round in 1...3 {
      let id = UInt64(round + 1)
      let now = Duration.seconds(round * 10)
      let stored = model("t\(round - 1)")
      #expect(
        machine.request(.force(rejecting: nil), date: date, now: now, newFlightID: id)
          == .start(flight: id, load(by: now + .seconds(7))))
      #expect(
        machine.advance(id, .loaded(stored), date: date, now: now)
          == .next(authorize(.forcedRefresh, by: now + .seconds(120), replacing: stored)))
      _ = machine.advance(id, .authorized(.success(model("t\(round)"))), date: date, now: now)
      _ = machine.advance(id, .saved, date: date, now: now)
    }
    let refusal = machine.request(
      .force(rejecting: nil), date: date, now: .seconds(40), newFlightID: 9)
    #expect(refusal == .refuse(.init(.refreshLoop)))
    if case .refuse(let error) = refusal { #expect(error.message.contains("u1/platformOnly")) }
    #expect(machine.flightID == nil, "a refusal starts nothing")
    // The window slides: at 70 s the start at 10 s has left it.
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(70), newFlightID: 10)
        == .start(flight: 10, load(by: .seconds(77))))
    #expect(
      machine.advance(10, .loaded(model("t3")), date: date, now: .seconds(70))
        == .next(authorize(.forcedRefresh, by: .seconds(190), replacing: model("t3"))))
  }

  @Test func theLoopGuardCountsNeitherJoinsNorOrdinaryAuthorizations() {
    let expired = model("t0", expiresIn: 1)
    var machine = self.machine(holding: expired, policy: policy(maxForced: 2))
    for id in UInt64(2)...6 {
      #expect(
        machine.request(.ifNeeded, date: date, now: .zero, newFlightID: id)
          == .start(flight: id, load(by: .seconds(7))))
      #expect(
        machine.advance(id, .loaded(expired), date: date, now: .zero)
          == .next(authorize(.expired, by: .seconds(120), replacing: expired)))
      _ = machine.advance(
        id, .authorized(.failure(.init(.authorizationFailed))), date: date, now: .zero)
    }
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 7)
        == .start(flight: 7, load(by: .seconds(7))))
    for _ in 1...3 {
      #expect(
        machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: noNewFlight())
          == .join(flight: 7))
    }
    #expect(
      machine.advance(7, .loaded(expired), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: expired)))
    for _ in 1...3 {
      #expect(
        machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: noNewFlight())
          == .join(flight: 7))
    }
    _ = machine.advance(7, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 8)
        == .start(flight: 8, load(by: .seconds(7))),
      "the second forced authorization is admitted: the joins were not counted")
    #expect(
      machine.advance(8, .loaded(expired), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: expired)))
    _ = machine.advance(8, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 9)
        == .refuse(.init(.refreshLoop)))
  }

  @Test func theLoopGuardCanEndALoadThatNeedsAForcedAuthorization() {
    var machine = coldMachine(policy(maxForced: 0))
    _ = machine.request(.force(rejecting: "t0"), date: date, now: .zero, newFlightID: 1)
    let action = machine.advance(1, .loaded(model("t0")), date: date, now: .zero)
    #expect(
      action
        == .end(Ending(flight: 1, result: .failed(.init(.refreshLoop)), refusedByLoopGuard: true)))
    if case .end(let ending) = action { #expect(!ending.stopsWork) }
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == model("t0"), "the store was read all the same")
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t0")))
  }

  @Test func aLoadServingAForcedJoinerIsNotCounted() {
    var machine = coldMachine(policy(maxForced: 1))
    _ = machine.request(.force(rejecting: "old"), date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(model("t1")), date: date, now: .zero)
    #expect(
      machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(model("t1")), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: model("t1"))))
  }

  @Test func signingOutForgetsTheLoopGuardHistory() {
    var machine = self.machine(holding: model("t0"), policy: policy(maxForced: 1))
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t0")), date: date, now: .zero)
    _ = machine.advance(2, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(!machine.isEvictable(now: .zero))
    #expect(machine.signOut() == nil)
    #expect(machine.isEvictable(now: .zero))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(7))))
    #expect(
      machine.advance(3, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120))))
  }

  // MARK: - Short-lived models and eviction

  @Test func theLeewayIsAtMostHalfTheLifetimeAModelArrivedWith() {
    #expect(Machine.leeway(60, forModelExpiring: nil, obtainedAt: date) == 60)
    #expect(
      Machine.leeway(60, forModelExpiring: date.addingTimeInterval(3600), obtainedAt: date) == 60)
    #expect(
      Machine.leeway(60, forModelExpiring: date.addingTimeInterval(100), obtainedAt: date) == 50)
    #expect(
      Machine.leeway(60, forModelExpiring: date.addingTimeInterval(30), obtainedAt: date) == 15)
    #expect(
      Machine.leeway(60, forModelExpiring: date.addingTimeInterval(-5), obtainedAt: date) == 0)
  }

  @Test func aShortLivedModelIsServedThenItsRenewalsCountForTheLoopGuard() {
    var machine = self.machine(
      cachedFromAuthorization: model("t1", expiresIn: 30), policy: policy(maxForced: 1))
    #expect(
      machine.request(
        .ifNeeded, date: date.addingTimeInterval(14), now: .zero, newFlightID: noNewFlight())
        == .serve(model("t1", expiresIn: 30)))
    #expect(
      machine.request(.ifNeeded, date: date.addingTimeInterval(16), now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(
        2, .loaded(model("t1", expiresIn: 30)), date: date.addingTimeInterval(16), now: .zero)
        == .next(authorize(.expired, by: .seconds(120), replacing: model("t1", expiresIn: 30))))
    // The renewal is short-lived too: renewing it again is refused within the window.
    let renewed = date.addingTimeInterval(20)
    _ = machine.advance(
      2, .authorized(.success(model("t2", expiresIn: 40))), date: date, now: .zero)
    _ = machine.advance(2, .saved, date: renewed, now: .zero)
    #expect(machine.servableModel(at: renewed) == model("t2", expiresIn: 40))
    #expect(
      machine.request(
        .ifNeeded, date: renewed.addingTimeInterval(15), now: .seconds(15), newFlightID: 3)
        == .refuse(.init(.refreshLoop)))
  }

  @Test func aLongLivedModelsRenewalIsNotCounted() {
    var machine = self.machine(
      cachedFromAuthorization: model("t1", expiresIn: 3600), policy: policy(maxForced: 0))
    #expect(
      machine.request(.ifNeeded, date: date.addingTimeInterval(3550), now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(machine.isEvictable(now: .zero) == false, "a flight is in progress")
    #expect(
      machine.advance(
        2, .loaded(model("t1", expiresIn: 3600)), date: date.addingTimeInterval(3550), now: .zero)
        == .next(
          authorize(.expired, by: .seconds(120), replacing: model("t1", expiresIn: 3600))))
    #expect(machine.isEvictable(now: .zero) == false, "a flight is in progress")
    _ = machine.advance(2, .authorized(.failure(.init(.userCancelled))), date: date, now: .zero)
    #expect(machine.isEvictable(now: .zero), "nothing was counted")
  }

  @Test func aKeyWithAuthorizationsInTheLoopWindowIsNotEvictable() {
    var machine = self.machine(cachedFromAuthorization: model("t1", expiresIn: 3600))
    #expect(machine.isEvictable(now: .zero))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(10), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(17))))
    #expect(
      machine.advance(2, .loaded(model("t1", expiresIn: 3600)), date: date, now: .seconds(10))
        == .next(
          authorize(.forcedRefresh, by: .seconds(130), replacing: model("t1", expiresIn: 3600))))
    _ = machine.advance(2, .authorized(.success(model("t2"))), date: date, now: .seconds(10))
    _ = machine.advance(2, .saved, date: date, now: .seconds(10))
    #expect(!machine.isEvictable(now: .seconds(69)))
    #expect(machine.isEvictable(now: .seconds(70)))
  }
}
