import Foundation
import Testing

@testable import AuthCoordinator

/// The refresh-loop guard with a non-interactive authorizer (issue 13, item 5), and its one
/// deadline (item 4): decisions only, no tasks.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineBackOffTests: StateMachineFixture {
  func silentPolicy(maxForced: Int = 1) -> Machine.Policy {
    var policy = self.policy(maxForced: maxForced)
    policy.interactiveAuthorizer = false
    policy.loopBackoff = .seconds(1)
    policy.maxLoopBackoff = .seconds(3)
    return policy
  }

  /// A warm machine holding `t1` whose one admitted forced refresh (the limit) got `t2`.
  func atTheLimit() -> Machine {
    var machine = self.machine(holding: model("t1"), policy: silentPolicy())
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t1")), date: date, now: .zero)
    _ = machine.advance(2, .authorized(.success(model("t2"))), date: date, now: .zero)
    _ = machine.advance(2, .saved, date: date, now: .zero)
    #expect(machine.cachedModel == model("t2"))
    return machine
  }

  @Test func beyondTheLimitTheFlightWaitsWithoutADeadlineThenRereadsTheStore() {
    var machine = atTheLimit()
    #expect(
      machine.request(.force(rejecting: "t2"), date: date, now: .seconds(5), newFlightID: 3)
        == .start(
          flight: 3, .init(kind: .backOff(until: .seconds(6), delay: .seconds(1)), deadline: nil)))
    // Callers rejecting the same token join the waiting flight; ordinary ones are served.
    #expect(
      machine.request(
        .force(rejecting: nil), date: date, now: .seconds(5), newFlightID: noNewFlight())
        == .join(flight: 3))
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(5), newFlightID: noNewFlight())
        == .serve(model("t2")))
    // No authorization deadline while waiting.
    #expect(machine.deadlineReached(3, phase: .authorization, date: date) == nil)
    #expect(
      machine.advance(3, .backedOff, date: date, now: .seconds(6))
        == .next(load(by: .seconds(13))))
    #expect(
      machine.advance(3, .loaded(model("t2")), date: date, now: .seconds(6))
        == .next(authorize(.forcedRefresh, by: .seconds(126), replacing: model("t2"))))
  }

  @Test func theDelayDoublesUpToItsLimitAndTheWindowForgets() {
    #expect(Machine.backoff(1, first: .seconds(1), limit: .seconds(30)) == .seconds(1))
    #expect(Machine.backoff(2, first: .seconds(1), limit: .seconds(30)) == .seconds(2))
    #expect(Machine.backoff(5, first: .seconds(1), limit: .seconds(30)) == .seconds(16))
    #expect(Machine.backoff(6, first: .seconds(1), limit: .seconds(30)) == .seconds(30))
    #expect(Machine.backoff(1_000, first: .seconds(1), limit: .seconds(Int64.max)) > .seconds(1))
    var machine = coldMachine(silentPolicy())
    #expect(machine.admitLoopGuardedAuthorization(now: .zero) == .admitted)
    #expect(machine.admitLoopGuardedAuthorization(now: .zero) == .delayed(.seconds(1)))
    #expect(machine.admitLoopGuardedAuthorization(now: .seconds(1)) == .delayed(.seconds(2)))
    #expect(machine.admitLoopGuardedAuthorization(now: .seconds(3)) == .delayed(.seconds(3)))
    #expect(machine.admitLoopGuardedAuthorization(now: .seconds(120)) == .admitted)
  }

  @Test func anInteractiveAuthorizerIsRefused() {
    var machine = coldMachine(policy(maxForced: 1))
    #expect(machine.admitLoopGuardedAuthorization(now: .zero) == .admitted)
    #expect(machine.admitLoopGuardedAuthorization(now: .zero) == .refused)
  }

  @Test func aSignOutDuringTheBackOffEndsTheFlight() {
    var machine = atTheLimit()
    _ = machine.request(.force(rejecting: "t2"), date: date, now: .zero, newFlightID: 3)
    #expect(machine.signOut()?.result == .cancelled(.signedOut))
    #expect(machine.advance(3, .backedOff, date: date, now: .seconds(1)) == .ignore)
    #expect(machine.flightID == nil)
  }

  @Test func aColdForcedRefreshBeyondTheLimitBacksOffAfterTheLoad() {
    var machine = coldMachine(silentPolicy())
    #expect(machine.admitLoopGuardedAuthorization(now: .zero) == .admitted)
    _ = machine.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(model("t1")), date: date, now: .zero)
        == .next(.init(kind: .backOff(until: .seconds(1), delay: .seconds(1)), deadline: nil)))
  }

  @Test func aNonInteractiveExchangeKeepsTheAuthorizationDeadline() {
    var silent = coldMachine(silentPolicy())
    _ = silent.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = silent.advance(1, .loaded(nil), date: date, now: .zero)
    #expect(silent.exchangeBegan(1, now: .seconds(1)) == nil)

    var interactive = coldMachine()
    _ = interactive.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = interactive.advance(1, .loaded(nil), date: date, now: .zero)
    #expect(interactive.exchangeBegan(1, now: .seconds(1)) == .seconds(21))
  }
}
