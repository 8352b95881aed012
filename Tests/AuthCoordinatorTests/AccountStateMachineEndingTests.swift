import Foundation
import Testing

@testable import AuthCoordinator

/// How flights end other than by their own result: the deadlines their steps carry (and the
/// exchange's), what each deadline does in each phase, the last waiter leaving, and signing out.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineEndingTests: StateMachineFixture {
  @Test func eachStepCarriesTheDeadlineOfItsPhase() {
    var machine = coldMachine()
    // Load and persist: the store timeout (7 s); authorize: the authorization timeout (120 s).
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 1)
        == .start(flight: 1, load(by: .seconds(8))))
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .seconds(2))
        == .next(authorize(.missing, by: .seconds(122))))
    #expect(
      machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .seconds(30))
        == .next(persist(model("t1"), by: .seconds(37))))
    #expect(Machine.StepKind.load.phase == .load)
    #expect(Machine.StepKind.authorize(.missing, replacing: nil).phase == .authorization)
    #expect(Machine.StepKind.persist(model("t1")).phase == .save)
    // Waiting before authorizing is bounded by the authorization deadline.
    #expect(Machine.StepKind.awaitPredecessors.phase == .authorization)
    #expect(Machine.StepKind.acquireLease.phase == .authorization)
    #expect(Machine.StepKind.awaitLeaseHolder(for: .seconds(1)).phase == .authorization)
  }

  @Test func hugeTimeoutsAreClampedToTheLongestWait() {
    var huge = policy
    huge.storeTimeout = .seconds(Int64.max)
    huge.authorizationTimeout = .seconds(Int64.max)
    huge.exchangeTimeout = .seconds(Int64.max)
    let longest = CoordinatorClock.longestWait
    #expect(longest == .seconds(3_153_600_000))
    var machine = coldMachine(huge)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(5), newFlightID: 1)
        == .start(flight: 1, load(by: .seconds(5) + longest)))
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .seconds(6))
        == .next(authorize(.missing, by: .seconds(6) + longest)))
    #expect(machine.exchangeBegan(1, now: .seconds(7)) == .seconds(7) + longest)
    #expect(
      machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .seconds(8))
        == .next(persist(model("t1"), by: .seconds(8) + longest)))
  }

  @Test func aStepWithAZeroTimeoutIsDueAtOnce() {
    var zero = policy
    zero.storeTimeout = .zero
    var machine = coldMachine(zero)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(5), newFlightID: 1)
        == .start(flight: 1, load(by: .seconds(5))))
  }

  // MARK: - The exchange

  @Test func theExchangeDeadlineIsReturnedOnce() {
    var (machine, id) = self.machine(in: .authorizing)
    #expect(machine.exchangeBegan(id, now: .seconds(40)) == .seconds(60))
    #expect(machine.exchangeBegan(id, now: .seconds(41)) == nil, "repeated")
    #expect(machine.flightID == id)
    #expect(
      machine.advance(id, .authorized(.success(model("t2"))), date: date, now: .seconds(45))
        == .next(persist(model("t2"), by: .seconds(52))))
    #expect(machine.exchangeBegan(id, now: .seconds(46)) == nil, "the flight is persisting")
  }

  @Test func theExchangeBeginningOutsideAnAuthorizationIsStale() {
    var (loading, loadID) = self.machine(in: .loading)
    #expect(loading.exchangeBegan(loadID, now: .zero) == nil)
    // Nothing was recorded: the load's own authorization still gets its exchange deadline.
    _ = loading.advance(loadID, .loaded(nil), date: date, now: .zero)
    #expect(loading.exchangeBegan(loadID, now: .seconds(3)) == .seconds(23))

    var (rereading, rereadID) = self.machine(in: .rereading)
    #expect(rereading.exchangeBegan(rereadID, now: .zero) == nil)
    _ = rereading.advance(rereadID, .loaded(nil), date: date, now: .zero)
    #expect(rereading.exchangeBegan(rereadID, now: .seconds(4)) == .seconds(24))

    var (persisting, persistID) = self.machine(in: .persisting)
    #expect(persisting.exchangeBegan(persistID, now: .zero) == nil)

    var (ended, endedID) = self.machine(in: .authorizing)
    _ = ended.deadlineReached(endedID, phase: .authorization, date: date)
    #expect(ended.exchangeBegan(endedID, now: .zero) == nil)

    var (other, otherID) = self.machine(in: .authorizing)
    #expect(other.exchangeBegan(otherID + 1, now: .zero) == nil)
    #expect(other.exchangeBegan(otherID, now: .zero) == .seconds(20), "not marked by the stale one")
  }

  // MARK: - Deadlines

  @Test func theAuthorizationDeadlineStopsTheFlightBeforeTheExchange() {
    var (machine, id) = self.machine(in: .authorizing)
    let ending = machine.deadlineReached(id, phase: .authorization, date: date)
    #expect(ending == Ending(flight: id, result: .timedOut(.authorization, .init(.timedOut))))
    #expect(ending?.stopsWork == true)
    if case .timedOut(_, let error) = ending?.result {
      #expect(error.message.contains("authorization"))
    }
    #expect(machine.flightID == nil)
    #expect(
      machine.advance(id, .authorized(.success(model("late"))), date: date, now: .zero)
        == .discardLateResult)
    #expect(machine.cachedModel == nil)
    #expect(machine.deadlineReached(id, phase: .authorization, date: date) == nil, "once")
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(8))))
    #expect(
      machine.advance(3, .loaded(nil), date: date, now: .seconds(1))
        == .next(authorize(.missing, by: .seconds(121))))
  }

  @Test func afterTheExchangeBeganOnlyTheExchangeDeadlineStopsTheFlight() {
    var (machine, id) = self.machine(in: .authorizing)
    _ = machine.exchangeBegan(id, now: .seconds(100))
    #expect(machine.deadlineReached(id, phase: .authorization, date: date) == nil)
    #expect(machine.flightID == id)
    let ending = machine.deadlineReached(id, phase: .exchange, date: date)
    #expect(ending == Ending(flight: id, result: .timedOut(.exchange, .init(.timedOut))))
    #expect(ending?.stopsWork == true)
    if case .timedOut(_, let error) = ending?.result {
      #expect(error.message.contains("exchange"))
    }
    #expect(machine.flightID == nil)
    #expect(machine.deadlineReached(id, phase: .exchange, date: date) == nil, "once")
  }

  @Test func afterTheExchangeBeganTheAuthorizationCanStillSucceed() {
    var (machine, id) = self.machine(in: .authorizing)
    _ = machine.exchangeBegan(id, now: .seconds(100))
    _ = machine.deadlineReached(id, phase: .authorization, date: date)
    #expect(
      machine.advance(id, .authorized(.success(model("t2"))), date: date, now: .seconds(110))
        == .next(persist(model("t2"), by: .seconds(117))))
  }

  @Test func theLoadDeadlineFailsTheFlightWithoutAuthorizing() {
    var (machine, id) = self.machine(in: .loading)
    let ending = machine.deadlineReached(id, phase: .load, date: date)
    #expect(
      ending
        == Ending(
          flight: id, result: .timedOut(.load, .init(.storeFailed)), storeTimedOut: .load))
    #expect(ending?.stopsWork == true)
    #expect(ending?.followers == .askAgain)
    #expect(machine.flightID == nil)
    #expect(machine.advance(id, .loaded(model("t1")), date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == nil, "the late load is not cached")
    // The cache stays unknown: the next request reads the store again.
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(8), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(15))))
  }

  /// Found by the fleet simulation (seed 0x53, a logout stopped before its announcement): the
  /// save went on past its deadline, found the user signed out (its grant no longer current)
  /// and undid itself, but memory kept the model it took at the deadline and served the
  /// signed-out user's token until the logout's announcement arrived.
  @Test func aSavePastItsDeadlineThatFindsTheUserSignedOutMakesMemoryForgetTheModel() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let late = model("t2", expiresIn: 300)
    _ = machine.advance(2, .authorized(.success(late)), date: date, now: .zero)
    _ = machine.deadlineReached(2, phase: .save, date: date.addingTimeInterval(2))
    #expect(machine.cachedModel == late, "served and cached at the deadline")
    #expect(
      machine.advance(2, .signedOutElsewhere, date: date.addingTimeInterval(5), now: .seconds(5))
        == .ignore)
    #expect(machine.cachedModel == nil, "the signed-out user's model is never served again")
    #expect(machine.savesPastDeadline.isEmpty)
  }

  /// Found by the fleet simulation (seed 0x2f7): a save past its deadline was refused by the
  /// fence (the flight's grant was revoked by a sign-out, or taken over); memory kept the
  /// model it took at the deadline and served it.
  @Test func aSavePastItsDeadlineRefusedByTheFenceMakesMemoryForgetTheModel() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let late = model("t2", expiresIn: 300)
    _ = machine.advance(2, .authorized(.success(late)), date: date, now: .zero)
    _ = machine.deadlineReached(2, phase: .save, date: date.addingTimeInterval(2))
    #expect(machine.cachedModel == late)
    #expect(
      machine.advance(2, .leaseLost, date: date.addingTimeInterval(5), now: .seconds(5)) == .ignore)
    #expect(machine.cachedModel == nil, "a deposed holder's result is not served")
    #expect(machine.savesPastDeadline.isEmpty)
  }

  /// Seed 0x2f7 again: a sign-out was announced while the flight saved, and the lease had not
  /// yet said whether the flight's grant predates it. The save deadline no longer serves the
  /// model meanwhile; an answer that the grant was not current, arriving after the flight
  /// ended, makes memory forget what it left.
  @Test func theSaveDeadlineDoesNotServeWhileASignOutCheckIsPending() {
    var (machine, id) = self.machine(in: .persisting)
    #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: id))
    #expect(machine.deadlineReached(id, phase: .save, date: date.addingTimeInterval(2)) == nil)
    #expect(machine.flightID == id, "the waiters wait for the save or the answer")
    // The save failed (in doubt about the grant): served unsaved, then the answer arrives.
    _ = machine.advance(
      id, .saveFailed(model("t2")), date: date.addingTimeInterval(3), now: .seconds(3))
    #expect(machine.cachedModel != nil)
    #expect(machine.signOutChecked(flight: id, grantCurrent: false) == nil)
    #expect(machine.cachedModel == nil, "the signed-out session's model is forgotten")
    #expect(machine.servableModel(at: date.addingTimeInterval(4)) == nil)
  }

  /// Found by the fleet simulation (seed 0x2320): a 20-second token obtained before a long
  /// pause had expired when the save's deadline passed, and the deadline served it.
  @Test func theSaveDeadlineNeverServesAModelThatExpiredMeanwhile() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let short = model("t2", expiresIn: 20)
    _ = machine.advance(2, .authorized(.success(short)), date: date, now: .zero)
    #expect(machine.deadlineReached(2, phase: .save, date: date.addingTimeInterval(20)) == nil)
    #expect(machine.flightID == 2, "the save goes on, with its waiters")
    #expect(machine.cachedModel == nil)
  }

  /// Seed 0x2320 once the deadline waited: the save then landed after the token's expiry, and
  /// its waiters were served it. They get a transient error now; the model is stored and kept
  /// (it holds the rotated refresh token), and the next request refreshes it.
  @Test(arguments: [false, true])
  func aModelThatExpiredBeforeItsSaveEndedIsNotServed(_ saveFails: Bool) {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let short = model("t2", expiresIn: 20)
    _ = machine.advance(2, .authorized(.success(short)), date: date, now: .zero)
    let later = date.addingTimeInterval(25)
    let action = machine.advance(
      2, saveFails ? .saveFailed(short) : .saved, date: later, now: .seconds(25))
    guard case .end(let ending) = action, case .failed(let error) = ending.result else {
      Issue.record("expected the flight to fail, got \(action)")
      return
    }
    #expect(error.code == .timedOut && error.isTransient)
    #expect(machine.cachedModel == short, "kept: its refresh token is the newest")
    #expect(machine.servableModel(at: later) == nil)
    let next = machine.request(.ifNeeded, date: later, now: .seconds(25), newFlightID: 3)
    #expect(next != .serve(short))
  }

  @Test func aLateAnswerForgetsOnlyTheModelItsFlightLeft() {
    var (machine, id) = self.machine(in: .persisting)
    #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: id))
    _ = machine.advance(id, .saveFailed(model("t2")), date: date, now: .seconds(1))
    // A later flight, under a grant of its own, replaces the model before the answer comes.
    _ = machine.request(.force(rejecting: "t2"), date: date, now: .seconds(2), newFlightID: 9)
    _ = machine.advance(9, .loaded(model("t2")), date: date, now: .seconds(2))
    _ = machine.advance(9, .authorized(.success(model("t3"))), date: date, now: .seconds(3))
    _ = machine.advance(9, .saved, date: date, now: .seconds(3))
    #expect(machine.cachedModel == model("t3"))
    #expect(machine.signOutChecked(flight: id, grantCurrent: false) == nil)
    #expect(machine.cachedModel == model("t3"), "not the checked flight's: kept")
  }

  @Test func aSavePastItsDeadlineThatLandsKeepsTheModel() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let late = model("t2", expiresIn: 300)
    _ = machine.advance(2, .authorized(.success(late)), date: date, now: .zero)
    _ = machine.deadlineReached(2, phase: .save, date: date.addingTimeInterval(2))
    _ = machine.advance(2, .saved, date: date.addingTimeInterval(5), now: .seconds(5))
    #expect(machine.cachedModel == late)
    #expect(machine.savesPastDeadline.isEmpty, "nothing kept once the save's outcome is in")
  }

  @Test func theSaveDeadlineServesAndCachesTheModelWhileTheSaveGoesOn() {
    var machine = self.machine(holding: nil)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(nil), date: date, now: .zero)
    let short = model("t2", expiresIn: 30)
    _ = machine.advance(2, .authorized(.success(short)), date: date, now: .zero)
    let deadlineDate = date.addingTimeInterval(10)
    let ending = machine.deadlineReached(2, phase: .save, date: deadlineDate)
    #expect(ending == Ending(flight: 2, result: .succeeded(short), storeTimedOut: .save))
    #expect(ending?.stopsWork == false, "the save goes on")
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == short)
    // Obtained at the deadline with 20 s left: a 10 s leeway.
    #expect(machine.servableModel(at: date.addingTimeInterval(19)) == short)
    #expect(machine.servableModel(at: date.addingTimeInterval(20)) == nil)
    #expect(machine.advance(2, .saved, date: date, now: .zero) == .ignore, "the late save")
    #expect(machine.cachedModel == short)
  }

  @Test(arguments: FlightInProgress.allCases)
  func aDeadlineOfAnotherPhaseDoesNothing(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    let others: [AuthEvent.FlightPhase]
    switch phase {
    case .loading, .rereading: others = [.authorization, .exchange, .save]
    case .authorizing: others = [.load, .save]
    case .persisting: others = [.load, .authorization, .exchange]
    }
    for other in others {
      #expect(machine.deadlineReached(id, phase: other, date: date) == nil, "\(other)")
    }
    #expect(machine.flightID == id)
  }

  @Test func theLoadDeadlineOfALoadThatWentOnToAuthorizeDoesNothing() {
    var (machine, id) = self.machine(in: .loading)
    _ = machine.advance(id, .loaded(nil), date: date, now: .zero)
    #expect(machine.deadlineReached(id, phase: .load, date: date) == nil)
    #expect(
      machine.deadlineReached(id, phase: .authorization, date: date)
        == Ending(flight: id, result: .timedOut(.authorization, .init(.timedOut))))
  }

  @Test func deadlinesOfAnIdleKeyDoNothing() {
    var machine = self.machine(holding: model("t1"))
    for phase in [AuthEvent.FlightPhase.load, .authorization, .exchange, .save] {
      #expect(machine.deadlineReached(1, phase: phase, date: date) == nil)
    }
    #expect(machine.cachedModel == model("t1"))
  }

  // MARK: - Endings

  @Test func onlyStoppedFlightsStopTheirWork() {
    let error = AuthCoordinatorError(.timedOut)
    #expect(!Ending(flight: 1, result: .succeeded(model("t1"))).stopsWork)
    #expect(!Ending(flight: 1, result: .succeeded(model("t1")), storeTimedOut: .save).stopsWork)
    #expect(!Ending(flight: 1, result: .failed(.init(.userCancelled))).stopsWork)
    #expect(
      !Ending(flight: 1, result: .failed(.init(.refreshLoop)), refusedByLoopGuard: true)
        .stopsWork)
    #expect(Ending(flight: 1, result: .timedOut(.authorization, error)).stopsWork)
    #expect(Ending(flight: 1, result: .timedOut(.exchange, error)).stopsWork)
    #expect(
      Ending(flight: 1, result: .timedOut(.load, .init(.storeFailed)), storeTimedOut: .load)
        .stopsWork)
    #expect(Ending(flight: 1, result: .cancelled(.lastWaiterLeft)).stopsWork)
    #expect(Ending(flight: 1, result: .cancelled(.signedOut)).stopsWork)
  }
}

// MARK: - The last waiter leaving, and signing out

extension AccountStateMachineEndingTests {
  @Test(arguments: [FlightInProgress.loading, .rereading, .authorizing])
  func theLastWaiterLeavingClosesTheQueueUnderCancel(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    #expect(machine.lastWaiterLeft(id) == .closeQueue)
    #expect(machine.flightID == id, "the flight stops only once its queue is closed")
    let ending = machine.queueClosed(id)
    #expect(ending == Ending(flight: id, result: .cancelled(.lastWaiterLeft)))
    #expect(ending.stopsWork)
    #expect(ending.followers == .askAgain)
    #expect(machine.flightID == nil)
    #expect(machine.lastWaiterLeft(id) == .ignore)
    if case .loaded = phase.lateOutcome {
      #expect(machine.advance(id, phase.lateOutcome, date: date, now: .zero) == .ignore)
    } else {
      #expect(
        machine.advance(id, phase.lateOutcome, date: date, now: .zero) == .discardLateResult)
    }
  }

  @Test func aCancelledLoadLeavesTheStoreToBeReadAgain() {
    var (machine, id) = self.machine(in: .loading)
    _ = machine.lastWaiterLeft(id)
    _ = machine.queueClosed(id)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(8))))
  }

  /// A caller joined after the last one left: the coordinator could not close the queue, so the
  /// flight simply goes on.
  @Test func aFlightWhoseQueueWasNotClosedGoesOn() {
    var (machine, id) = self.machine(in: .authorizing)
    #expect(machine.lastWaiterLeft(id) == .closeQueue)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: id))
    #expect(
      machine.advance(id, .authorized(.success(model("t2"))), date: date, now: .zero)
        == .next(persist(model("t2"), by: .seconds(7))))
  }

  @Test(arguments: [FlightInProgress.loading, .rereading, .authorizing])
  func theLastWaiterLeavingKeepsTheFlightUnderFinishAndCache(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase, policy: policy(whenAbandoned: .finishAndCache))
    #expect(machine.lastWaiterLeft(id) == .keepRunning)
    #expect(machine.flightID == id)
  }

  @Test(arguments: [AuthCoordinator.AbandonPolicy.cancel, .finishAndCache])
  func theLastWaiterLeavingDuringTheSaveKeepsTheFlight(_ abandon: AuthCoordinator.AbandonPolicy) {
    var (machine, id) = self.machine(in: .persisting, policy: policy(whenAbandoned: abandon))
    #expect(machine.lastWaiterLeft(id) == .keepRunning)
    #expect(
      machine.advance(id, .saved, date: date, now: .zero)
        == .end(Ending(flight: id, result: .succeeded(model("t2")))))
    #expect(machine.cachedModel == model("t2"))
  }

  @Test func signingOutWithoutAFlightForgetsTheModel() {
    var machine = self.machine(holding: model("t1"))
    #expect(machine.signOut() == nil)
    #expect(machine.cachedModel == nil)
    #expect(machine.servableModel(at: date) == nil)
    #expect(machine.isEvictable(now: .zero))
    // Known to be empty: the store is read again before authorizing (another process may
    // have signed in meanwhile), and a valid model there is adopted, not authorized.
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.missing, by: .seconds(120))))
  }

  @Test(arguments: FlightInProgress.allCases)
  func signingOutCancelsTheFlightAndFailsItsFollowers(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    let ending = machine.signOut()
    #expect(
      ending
        == Ending(
          flight: id, result: .cancelled(.signedOut), followers: .fail(.init(.signedOut))))
    #expect(ending?.stopsWork == true)
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == nil)
    #expect(machine.signOut() == nil, "nothing left to cancel")
    if case .loaded = phase.lateOutcome {
      #expect(machine.advance(id, phase.lateOutcome, date: date, now: .zero) == .ignore)
    } else if case .saved = phase.lateOutcome {
      #expect(machine.advance(id, .saved, date: date, now: .zero) == .ignore)
    } else {
      #expect(
        machine.advance(id, phase.lateOutcome, date: date, now: .zero) == .discardLateResult)
    }
    #expect(machine.cachedModel == nil, "the late outcome is not cached")
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 5)
        == .start(flight: 5, load(by: .seconds(7))))
    #expect(
      machine.advance(5, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.missing, by: .seconds(120))))
  }

  @Test func theSignedOutErrorNamesTheAccount() {
    var (machine, _) = self.machine(in: .authorizing)
    guard case .fail(let error) = machine.signOut()?.followers else {
      Issue.record("followers must fail after a sign-out")
      return
    }
    #expect(error.code == .signedOut)
    #expect(error.message.contains("u1"))
  }
}
