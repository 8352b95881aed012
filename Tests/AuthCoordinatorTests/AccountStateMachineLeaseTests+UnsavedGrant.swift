import Foundation
import Testing

@testable import AuthCoordinator

// Rule 19 before rule 21, decided by the machine without tasks: a flight under the lease that
// would go on with memory's unsaved model (newer than the store's) first asks the lease whether
// a sign-out came since the grant that model was obtained under (`checkUnsavedGrant`). Fleet
// simulation, seed 0x47143 (a part of `AccountStateMachineLeaseTests`, in a file of its own).
extension AccountStateMachineLeaseTests {
  /// The grant flight 1 obtained its model under.
  var firstGrant: LeaseGrant {
    LeaseGrant(
      key: u1, owner: "here", fence: 1, generation: 0, expiresAt: date.addingTimeInterval(15))
  }

  /// A machine whose flight 1 obtained `t1` (refresh token `r-t1`) under ``firstGrant`` from an
  /// empty store, and whose save failed; then forced refresh 2, rejecting `t1`, took the lease
  /// again and re-read the store: empty.
  func refreshOfAnUnsavedModel() -> (Machine, AuthModel, Machine.AdvanceAction) {
    let unsaved = refreshable("t1")
    var machine = coldMachine(leasePolicy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .leaseAttempted(.acquired), date: date, now: .zero)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(unsaved)), date: date, now: .zero)
    let ended = machine.advance(
      1, .saveFailed(unsaved, obtainedUnder: firstGrant), date: date, now: .zero)
    if case .end(let ending) = ended {
      #expect(ending.result == .succeeded(unsaved), "served though unsaved")
    } else {
      Issue.record("a failed save ends the flight: \(ended)")
    }
    #expect(machine.unsavedGrant(of: unsaved) == firstGrant)
    let now = Duration.seconds(20)
    _ = machine.request(.force(rejecting: "t1"), date: date, now: now, newFlightID: 2)
    _ = machine.advance(2, .leaseAttempted(.acquired), date: date, now: now)
    // Advanced first: a tuple would copy the machine before the advance.
    let reread = machine.advance(2, .loaded(nil), date: date, now: now)
    return (machine, unsaved, reread)
  }

  func checkUnsavedGrant(_ grant: LeaseGrant, _ machine: Machine, now: Duration)
    -> Machine.AdvanceAction
  {
    .next(
      .init(
        kind: .checkUnsavedGrant(grant),
        deadline: CoordinatorClock.deadline(after: machine.policy.storeTimeout, from: now)))
  }

  /// Before the fix, the re-read went straight on to the token request, spending the unsaved
  /// model's refresh token whether or not its session had been signed out elsewhere.
  @Test func aReReadThatPrefersAnUnsavedModelAsksAboutItsGrantFirst() {
    let (machine, _, action) = refreshOfAnUnsavedModel()
    #expect(action == checkUnsavedGrant(firstGrant, machine, now: .seconds(20)))
  }

  /// Signed out since: memory forgets the model, the store is read again under the grant, and
  /// the authorization replaces what the store holds (nothing: a new session).
  @Test func signedOutSinceTheGrantTheUnsavedModelIsForgotten() {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    let now = Duration.seconds(21)
    #expect(
      machine.advance(2, .unsavedGrantChecked(firstGrant, .success(false)), date: date, now: now)
        == .next(confirm(by: now + machine.policy.storeTimeout)))
    #expect(machine.cachedModel == nil)
    #expect(machine.unsavedGrant(of: unsaved) == nil)
    #expect(!machine.needsSave(unsaved), "its retry only checks its earlier write")
    let action = machine.advance(2, .loaded(nil), date: date, now: now)
    guard case .next(let step) = action else {
      Issue.record("the flight authorizes: \(action)")
      return
    }
    #expect(step.kind == .authorize(.forcedRefresh, replacing: nil))
  }

  /// Not signed out: the model is the newest the process knows. The store is read again (the
  /// question took time the token request needs), the lease is not asked twice, and the
  /// refresh spends the unsaved model's refresh token.
  @Test func currentTheUnsavedModelIsRefreshedWithoutAskingTwice() {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    let now = Duration.seconds(21)
    #expect(
      machine.advance(2, .unsavedGrantChecked(firstGrant, .success(true)), date: date, now: now)
        == .next(confirm(by: now + machine.policy.storeTimeout)))
    let action = machine.advance(2, .loaded(nil), date: date, now: now)
    guard case .next(let step) = action else {
      Issue.record("the flight authorizes: \(action)")
      return
    }
    #expect(step.kind == .authorize(.forcedRefresh, replacing: unsaved))
    #expect(machine.needsSave(unsaved), "still unsaved until stored")
  }

  /// A pause past the time to live after the lease said "current": the re-read finds the grant
  /// lost and the flight takes the lease again. A sign-out may have come during the pause, and
  /// the new grant, taken after it, would not show it: the lease is asked again. Before the fix
  /// the answer outlived the grant it was given under, and the refresh spent the model's token.
  @Test func aGrantLostAfterTheAnswerAsksAgainUnderTheNextGrant() {
    var (machine, _, _) = refreshOfAnUnsavedModel()
    let now = Duration.seconds(21)
    _ = machine.advance(2, .unsavedGrantChecked(firstGrant, .success(true)), date: date, now: now)
    #expect(
      machine.advance(2, .leaseLost, date: date, now: now)
        == .next(.init(kind: .acquireLease, deadline: nil)))
    #expect(
      machine.advance(2, .leaseAttempted(.acquired), date: date, now: now)
        == .next(confirm(by: now + machine.policy.storeTimeout)))
    #expect(
      machine.advance(2, .loaded(nil), date: date, now: now)
        == checkUnsavedGrant(firstGrant, machine, now: now))
  }

  /// No answer: nothing is spent, the callers get the lease's error once the lease is given
  /// back, and memory keeps the model for the next request to ask again.
  @Test func noAnswerSpendsNothingAndKeepsTheModel() {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    let error = AuthCoordinatorError(.storeFailed)
    #expect(
      machine.advance(
        2, .unsavedGrantChecked(firstGrant, .failure(error)), date: date, now: .seconds(21))
        == .next(.init(kind: .releaseLease, deadline: nil)))
    let released = machine.advance(2, .leaseReleased, date: date, now: .seconds(21))
    if case .end(let ending) = released {
      #expect(ending.result == .failed(error))
    } else {
      Issue.record("the flight ends once the lease is back: \(released)")
    }
    #expect(machine.needsSave(unsaved))
    #expect(machine.unsavedGrant(of: unsaved) == firstGrant)
  }

  /// A question that hangs ends the flight at its own deadline, in doubt, with the model kept;
  /// an answer that then says "signed out" still makes memory forget it.
  @Test func aQuestionPastItsDeadlineEndsTheFlightAndALateNoStillCounts() {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    let deadline = CoordinatorClock.deadline(after: machine.policy.storeTimeout, from: .seconds(20))
    let ending = machine.deadlineReached(2, phase: .load, date: date, at: deadline)
    guard case .timedOut(.load, let error) = ending?.result else {
      Issue.record("the flight ends at the question's deadline: \(String(describing: ending))")
      return
    }
    #expect(error.code == .storeFailed)
    #expect(machine.flightID == nil)
    #expect(machine.needsSave(unsaved), "in doubt, kept")
    #expect(
      machine.advance(
        2, .unsavedGrantChecked(firstGrant, .success(false)), date: date, now: deadline)
        == .ignore)
    #expect(machine.cachedModel == nil, "the late answer: signed out")
  }

  /// A logout here while the flight asks: the flight ends `signed_out` and memory is empty;
  /// the answer that arrives after it, whatever it says, changes nothing.
  @Test(arguments: [true, false])
  func aLogoutHereWhileTheFlightAsksEndsIt(_ current: Bool) {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    let ending = machine.signOut()
    #expect(ending?.result == .cancelled(.signedOut))
    #expect(ending?.stopsWork == true)
    #expect(machine.cachedModel == nil)
    #expect(!machine.needsSave(unsaved), "its retry only checks its earlier write")
    #expect(
      machine.advance(
        2, .unsavedGrantChecked(firstGrant, .success(current)), date: date, now: .seconds(21))
        == .ignore)
    #expect(machine.cachedModel == nil)
    #expect(machine.flightID == nil)
  }

  /// A model obtained without a grant (no lease), or a stored one, is never asked about.
  @Test func aModelWithoutAGrantIsNotAskedAbout() {
    var (machine, unsaved, _) = refreshOfAnUnsavedModel()
    _ = machine.advance(
      2, .unsavedGrantChecked(firstGrant, .success(true)), date: date, now: .seconds(21))
    _ = machine.advance(2, .loaded(nil), date: date, now: .seconds(21))
    let next = refreshable("t2")
    _ = machine.advance(2, .authorized(.success(next)), date: date, now: .seconds(21))
    _ = machine.advance(2, .saveFailed(next), date: date, now: .seconds(21))
    #expect(machine.needsSave(next))
    #expect(machine.unsavedGrant(of: next) == nil)
    #expect(machine.unsavedGrant(of: unsaved) == nil, "not memory's model any more")
  }
}
