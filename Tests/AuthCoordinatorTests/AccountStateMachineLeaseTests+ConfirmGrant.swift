import Foundation
import Testing

@testable import AuthCoordinator

// A flight that asks the lease about its grant before serving (`confirmGrant`, rule 19) and is
// stopped from outside while it asks: a logout here, or a second announcement once its lease
// went back (a part of `AccountStateMachineLeaseTests`, in a file of its own for its size).
extension AccountStateMachineLeaseTests {
  /// The step that asks the lease about `grant` before serving, with its own deadline: the
  /// store timeout from `now`.
  func confirming(_ grant: LeaseGrant, _ machine: Machine, now: Duration = .zero)
    -> Machine.AdvanceAction
  {
    .next(
      .init(
        kind: .confirmGrant(grant),
        deadline: CoordinatorClock.deadline(after: machine.policy.storeTimeout, from: now)))
  }

  /// Flight 2 persisting the model it obtained under `grant`, after a sign-out was announced
  /// while it held the grant (the lease has not answered yet).
  func persistingAfterAnAnnouncement() -> (Machine, UInt64, LeaseGrant) {
    let grant = LeaseGrant(
      key: u1, owner: "here", fence: 7, generation: 3, expiresAt: date.addingTimeInterval(15))
    var (saver, id) = self.machine(in: .persisting)
    _ = saver.signOutAnnounced(flightHoldsGrant: true, grant: grant)
    return (saver, id, grant)
  }

  /// Found by testing the gap named last stop: a lease that hung while a flight asked it about
  /// its grant held every caller without a timeout of its own for good. The question has a
  /// deadline of its own: past it, in doubt, not current; the flight ends `signed_out`,
  /// memory forgets its model, and its task goes on with its save retry once the lease answers.
  @Test(arguments: [true, false])
  func aQuestionAboutTheGrantThatHangsEndsTheFlightInDoubtAtItsDeadline(_ saveFailed: Bool) {
    var (saver, id, grant) = persistingAfterAnAnnouncement()
    let obtained = model("t2")
    let outcome: Machine.StepOutcome = saveFailed ? .saveFailed(obtained) : .saved
    let now = Duration.seconds(3)
    #expect(saver.advance(id, outcome, date: date, now: now) == confirming(grant, saver, now: now))
    let deadline = CoordinatorClock.deadline(after: saver.policy.storeTimeout, from: now)
    #expect(
      saver.deadlineReached(id, phase: .save, date: date, at: .seconds(1)) == nil,
      "an earlier step's deadline: the callers still wait for the answer")
    guard let ending = saver.deadlineReached(id, phase: .save, date: date, at: deadline) else {
      Issue.record("before the fix: the question's wait had no end")
      return
    }
    #expect(ending.result == .cancelled(.signedOut), "in doubt, not current")
    #expect(ending.saveRetry == nil, "the task carries its retry on once the answer comes")
    #expect(ending.stopsWork == !saveFailed)
    #expect(saver.flightID == nil)
    #expect(saver.cachedModel == nil)
    // The answer comes late and says current: a save retry goes on, asking the lease before
    // it writes (memory let the model go).
    let late = saver.advance(id, .grantConfirmed(current: true), date: date, now: deadline)
    if saveFailed {
      guard case .next(let wait) = late, case .awaitSaveRetry = wait.kind else {
        Issue.record("the retry goes on: \(late)")
        return
      }
      #expect(
        saver.advance(id, .backedOff, date: date, now: deadline + .seconds(1))
          == .next(
            .init(kind: .retrySave(obtained, attempt: 1, confirmingGrant: true), deadline: nil)))
    } else {
      #expect(late == .ignore)
    }
  }

  enum StopWhileConfirming: CaseIterable, Sendable {
    /// A logout in this process.
    case logoutHere
    /// Another announcement, which finds the flight holding no grant.
    case announcementElsewhere
  }

  /// Found by reading the untested gaps of the last stop: a flight whose save failed while a
  /// sign-out check was pending asks the lease before serving, carrying its save retry. A
  /// logout here (or another announcement) that ended it then made its task's answer a stale
  /// outcome of a save retry, which the machine took for an inconsistency and trapped. The
  /// answer now still decides what memory keeps, the task is not cancelled, and its retry goes
  /// on from its first wait: it saves, or checks and undoes, its write.
  @Test(arguments: StopWhileConfirming.allCases, [true, false])
  func aFlightStoppedWhileItAsksAboutItsGrantLetsItsSaveRetryGoOn(
    _ stop: StopWhileConfirming, _ current: Bool
  ) {
    var (saver, id, grant) = persistingAfterAnAnnouncement()
    let unsaved = model("t2")
    #expect(
      saver.advance(id, .saveFailed(unsaved), date: date, now: .zero)
        == confirming(grant, saver))
    let ending: Machine.Ending?
    switch stop {
    case .logoutHere: ending = saver.signOut()
    case .announcementElsewhere:
      guard case .stopped(let stopped) = saver.signOutAnnounced(flightHoldsGrant: false) else {
        Issue.record("a flight holding no grant stops at the announcement")
        return
      }
      ending = stopped
    }
    #expect(ending?.result == .cancelled(.signedOut))
    #expect(ending?.stopsWork == false, "its task goes on with the save retry")
    #expect(saver.flightID == nil)
    #expect(saver.cachedModel == nil, "a sign-out: memory forgets")
    // The task's answer arrives: before the fix, a trap.
    let next = saver.advance(id, .grantConfirmed(current: current), date: date, now: .zero)
    guard case .next(let step) = next, case .awaitSaveRetry = step.kind else {
      Issue.record("the save retry goes on from its first wait: \(next)")
      return
    }
    let retried = saver.advance(id, .backedOff, date: date, now: .seconds(1))
    switch stop {
    case .logoutHere:
      // The logout removed the store's models: the retry only checks its earlier write.
      #expect(retried == .next(.init(kind: .checkWrite(unsaved), deadline: nil)))
    case .announcementElsewhere:
      // Memory forgot it on an announcement: the lease decides before the write (0xf382c).
      #expect(
        retried
          == .next(
            .init(kind: .retrySave(unsaved, attempt: 1, confirmingGrant: true), deadline: nil)))
    }
  }

  /// Without a save retry, the answer to a flight stopped while it asked still decides what
  /// memory keeps: the model its save stored, read back since, is the signed-out session's
  /// when the grant predates the sign-out.
  @Test(arguments: [true, false])
  func aStaleAnswerStillDecidesWhetherMemoryKeepsTheFlightsModel(_ current: Bool) {
    var (saver, id, grant) = persistingAfterAnAnnouncement()
    let saved = model("t2")
    #expect(
      saver.advance(id, .saved, date: date, now: .zero)
        == confirming(grant, saver))
    #expect(saver.signOut(elsewhere: true)?.result == .cancelled(.signedOut))
    // A request reads the flight's model back from the store before the answer.
    _ = saver.request(.ifNeeded, date: date, now: .zero, newFlightID: 5)
    _ = saver.advance(5, .loaded(saved), date: date, now: .zero)
    #expect(saver.cachedModel == saved)
    #expect(
      saver.advance(id, .grantConfirmed(current: current), date: date, now: .zero) == .ignore)
    #expect(saver.cachedModel == (current ? saved : nil))
  }
}
