import Foundation
import Testing

@testable import AuthCoordinator

/// Rule 21's retries decided by the state machine, without tasks: after a failed save the
/// flight's task waits, saves again in the key's store order, and doubles its wait after each
/// failure up to the longest, until the save lands, a newer model replaces the unsaved one, a
/// logout removes it, the lease turns out lost, or the task is cancelled.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineSaveRetryTests: StateMachineFixture {
  typealias Step = Machine.Step

  func policy(saveRetry first: Duration, longest: Duration) -> Machine.Policy {
    var policy = self.policy
    policy.saveRetryDelay = first
    policy.maxSaveRetryDelay = longest
    return policy
  }

  /// A machine whose flight 2 refreshed `t0` to `t1` at `now` 0 and whose save then failed,
  /// and the first step of its retry.
  func unsaved(_ policy: Machine.Policy? = nil) -> (Machine, AuthModel, Step?) {
    let stored = model("t0", expiresIn: -10, refreshToken: "r0")
    let unsaved = model("t1", expiresIn: 3600, refreshToken: "r1")
    var machine = self.machine(holding: stored, policy: policy)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(stored), date: date, now: .zero)
    _ = machine.advance(2, .authorized(.success(unsaved)), date: date, now: .zero)
    guard case .end(let ending) = machine.advance(2, .saveFailed(unsaved), date: date, now: .zero)
    else {
      Issue.record("a failed save ends the flight: its callers get the model")
      return (machine, unsaved, nil)
    }
    #expect(ending.result == .succeeded(unsaved))
    return (machine, unsaved, ending.saveRetry)
  }

  func wait(until: Duration) -> Step { .init(kind: .awaitSaveRetry(until: until), deadline: nil) }
  func save(_ model: AuthModel, attempt: Int) -> Step {
    .init(kind: .retrySave(model, attempt: attempt), deadline: nil)
  }

  @Test func theWaitDoublesAfterEachFailureUpToTheLongestUntilTheSaveLands() {
    var (machine, unsaved, first) = self.unsaved(
      policy(saveRetry: .seconds(1), longest: .seconds(3)))
    #expect(first == wait(until: .seconds(1)))
    // Each failure at `now` waits twice as long as the last, from then, never past 3 s.
    var now = Duration.seconds(1)
    for (attempt, delay) in [(1, 2), (2, 3), (3, 3)] {
      #expect(
        machine.advance(2, .backedOff, date: date, now: now)
          == .next(save(unsaved, attempt: attempt)))
      now += .milliseconds(100)
      #expect(
        machine.advance(2, .saveFailed(unsaved), date: date, now: now)
          == .next(wait(until: now + .seconds(delay))))
      #expect(machine.needsSave(unsaved))
      now += .seconds(delay)
    }
    #expect(
      machine.advance(2, .backedOff, date: date, now: now) == .next(save(unsaved, attempt: 4)))
    #expect(machine.advance(2, .saved, date: date, now: now) == .saveRetryOver(saved: true))
    #expect(!machine.needsSave(unsaved))
    #expect(machine.cachedModel == unsaved)
    #expect(machine.isEvictable(now: .seconds(1000)), "stored: the key may be forgotten")
    #expect(machine.advance(2, .backedOff, date: date, now: now) == .ignore, "over")
  }

  /// A zero delay would retry a failing store in a tight loop.
  @Test func aZeroDelayWaitsAMillisecond() {
    let (_, _, first) = unsaved(policy(saveRetry: .zero, longest: .zero))
    #expect(first == wait(until: .milliseconds(1)))
  }

  @Test func aNewerModelTurnsTheRetryIntoACheckOfItsEarlierWrite() {
    var (machine, unsaved, _) = self.unsaved()
    // A forced refresh rejecting t1 authorizes and stores t2 meanwhile.
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
    _ = machine.advance(3, .loaded(nil), date: date, now: .milliseconds(10))
    let newer = model("t2", refreshToken: "r2")
    _ = machine.advance(3, .authorized(.success(newer)), date: date, now: .milliseconds(20))
    _ = machine.advance(3, .saved, date: date, now: .milliseconds(30))
    #expect(!machine.needsSave(unsaved))
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(1))
        == .next(.init(kind: .checkWrite(unsaved), deadline: nil)),
      "no save (the older model's would overwrite the newer one), only the check of a write")
    #expect(
      machine.advance(2, .saved, date: date, now: .seconds(1)) == .saveRetryOver(saved: false),
      "the grant is current: nothing to undo, nothing saved")
    #expect(machine.cachedModel == newer)
  }

  /// Found by the randomized stress with refresh tokens, a slow store and failing saves
  /// (2026-12-06): the retry's wait ended while a forced refresh that had spent the unsaved
  /// model's refresh token was saving its result. Memory still held the unsaved model, so the
  /// retry saved it, in the store's order after the newer model, and the store went back to
  /// the spent refresh token, which the next refresh sent again. While a flight spends the
  /// retried model's refresh token, or a stopped refresh that may have spent it is left to
  /// finish, the retry waits again: their outcome says whether the model is still needed.
  @Test func aRetryWaitsWhileAFlightSpendsItsModelsRefreshToken() {
    var (machine, unsaved, _) = self.unsaved()
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
    let stored = model("t0", expiresIn: -10, refreshToken: "r0")
    guard
      case .next(let step) = machine.advance(3, .loaded(stored), date: date, now: .milliseconds(10)),
      case .authorize(_, let replacing) = step.kind
    else {
      Issue.record("the forced refresh authorizes")
      return
    }
    #expect(replacing == unsaved, "it spends r1, the unsaved model's refresh token")
    let newer = model("t2", refreshToken: "r2")
    _ = machine.advance(3, .authorized(.success(newer)), date: date, now: .milliseconds(20))
    // Its save is issued; the retry's wait ends before it lands.
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(1))
        == .next(wait(until: .seconds(2))),
      "no save of t1 now: it would land after t2's and bring back r1, which was spent")
    _ = machine.advance(3, .saved, date: date, now: .seconds(1))
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(2))
        == .next(.init(kind: .checkWrite(unsaved), deadline: nil)),
      "t2 replaced it: only the check of an earlier write")

    // A refresh that failed spent nothing for sure, and memory still needs the model saved.
    var (failing, kept, _) = self.unsaved()
    _ = failing.request(.force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
    _ = failing.advance(3, .loaded(stored), date: date, now: .milliseconds(10))
    #expect(
      failing.advance(2, .backedOff, date: date, now: .seconds(1))
        == .next(wait(until: .seconds(2))))
    _ = failing.advance(
      3, .authorized(.failure(AuthCoordinatorError(.authorizationFailed, "no"))), date: date,
      now: .seconds(1))
    #expect(failing.needsSave(kept))
    #expect(
      failing.advance(2, .backedOff, date: date, now: .seconds(2)) == .next(save(kept, attempt: 1)),
      "a wait that saved nothing is no attempt")
  }

  /// Faults during the wait that replaces a retry's save: the flight it waits for fails to
  /// save its own model, or the user logs out. Either way the older model is not written
  /// again; the retry only checks its earlier write.
  @Test func aFailedSaveOrALogoutDuringTheWaitForAReplacementWritesNothingOld() {
    let stored = model("t0", expiresIn: -10, refreshToken: "r0")
    let newer = model("t2", refreshToken: "r2")
    for fault in ["failed save", "logout"] {
      var (machine, unsaved, _) = self.unsaved()
      _ = machine.request(
        .force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
      _ = machine.advance(3, .loaded(stored), date: date, now: .milliseconds(10))
      _ = machine.advance(3, .authorized(.success(newer)), date: date, now: .milliseconds(20))
      #expect(
        machine.advance(2, .backedOff, date: date, now: .seconds(1))
          == .next(wait(until: .seconds(2))), "\(fault): the retry waits for flight 3")
      if fault == "logout" {
        _ = machine.signOut()
      } else {
        _ = machine.advance(3, .saveFailed(newer), date: date, now: .seconds(1))
        #expect(machine.needsSave(newer), "t2 is now the unsaved model, retried itself")
      }
      #expect(!machine.needsSave(unsaved), "\(fault)")
      #expect(
        machine.advance(2, .backedOff, date: date, now: .seconds(2))
          == .next(.init(kind: .checkWrite(unsaved), deadline: nil)),
        "\(fault): no save of t1, whose refresh token t2 spent")
    }
  }

  /// Found by the same stress: the refresh that spent the unsaved model's refresh token was
  /// stopped at its deadline and left to finish. Its late result, stored, expired sooner than
  /// the unsaved model, so memory kept the unsaved one (an expiry says nothing of which is
  /// newer), and its retry then saved it over the late result. A late result that spent the
  /// refresh token of memory's model replaces it, whatever the expiries, and the retry only
  /// checks its earlier write.
  @Test func aLateResultThatSpentTheUnsavedModelsRefreshTokenEndsItsRetry() {
    var (machine, unsaved, _) = self.unsaved()
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
    let stored = model("t0", expiresIn: -10, refreshToken: "r0")
    _ = machine.advance(3, .loaded(stored), date: date, now: .milliseconds(10))
    #expect(
      machine.deadlineReached(3, phase: .authorization, date: date)?.letsRefreshFinish == true)
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(1))
        == .next(wait(until: .seconds(2))),
      "the stopped refresh spends r1: the retry waits for its result")
    let late = model("t2", expiresIn: 60, refreshToken: "r2")  // sooner than t1's hour
    #expect(
      machine.advance(3, .authorized(.success(late)), date: date, now: .seconds(1))
        == .next(.init(kind: .persistLateResult(late), deadline: nil)))
    #expect(machine.advance(3, .lateResultSaved(late), date: date, now: .seconds(1)) == .ignore)
    #expect(machine.cachedModel == late, "it spent r1: newer than t1, whatever the expiries")
    #expect(!machine.needsSave(unsaved))
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(2))
        == .next(.init(kind: .checkWrite(unsaved), deadline: nil)),
      "no save of t1 over t2")
  }

  /// Fleet simulation, seed 0x10853: the question whether an earlier write came after a
  /// sign-out outlives memory's model; a check the lease cannot answer is asked again.
  @Test func aLogoutDuringTheWaitEndsTheRetryOnceItsWriteIsChecked() {
    var (machine, unsaved, _) = self.unsaved()
    _ = machine.signOut()
    let check = Machine.AdvanceAction.next(.init(kind: .checkWrite(unsaved), deadline: nil))
    #expect(machine.advance(2, .backedOff, date: date, now: .seconds(1)) == check)
    #expect(
      machine.advance(2, .saveFailed(unsaved), date: date, now: .seconds(1))
        == .next(wait(until: .seconds(3))), "the lease could not answer: asked again")
    #expect(machine.advance(2, .backedOff, date: date, now: .seconds(3)) == check)
    #expect(
      machine.advance(2, .signedOutElsewhere, date: date, now: .seconds(3))
        == .saveRetryOver(saved: false))
    #expect(machine.cachedModel == nil)
  }

  @Test func aLostLeaseEndsTheRetryAndMemoryFollowsTheStoreAgain() {
    var (machine, _, _) = self.unsaved()
    _ = machine.advance(2, .backedOff, date: date, now: .seconds(1))
    #expect(
      machine.advance(2, .leaseLost, date: date, now: .seconds(1)) == .saveRetryOver(saved: false))
    #expect(!machine.hasUnsavedModel, "settled: the next re-read takes what the next holder stored")
  }

  /// Found by the fleet simulation's 1,000,000-seed run (seed 0xf382c): a sign-out's
  /// announcement arrived late, after a newer session's flight ended with its save failed.
  /// Memory forgets the model, as an announcement makes it; the retry used to end at its next
  /// attempt with a check of its grant (current) and no write, and the rotation was lost. It
  /// now saves on the lease's answer: the grant decides, not the announcement's timing.
  @Test func aRetryWhoseModelAnAnnouncementForgotSavesOnTheLeasesAnswer() {
    var (machine, unsaved, _) = self.unsaved()
    #expect(machine.signOutAnnounced(flightHoldsGrant: false) == .stopped(nil))
    #expect(machine.cachedModel == nil, "memory forgets, as an announcement makes it")
    let confirmed = Machine.AdvanceAction.next(
      .init(kind: .retrySave(unsaved, attempt: 1, confirmingGrant: true), deadline: nil))
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(1)) == confirmed,
      "before the fix: checkWrite, which never writes")
    #expect(
      machine.advance(2, .saveFailed(unsaved), date: date, now: .seconds(1))
        == .next(wait(until: .seconds(3))), "in doubt: asked again after the next wait")
    // A read meanwhile brings back the model it replaced: older, the retry goes on.
    _ = machine.request(.ifNeeded, date: date, now: .seconds(2), newFlightID: 3)
    _ = machine.advance(
      3, .loaded(model("t0", expiresIn: 3600, refreshToken: "r0")), date: date, now: .seconds(2))
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(3))
        == .next(.init(kind: .retrySave(unsaved, attempt: 2, confirmingGrant: true), deadline: nil))
    )
    #expect(
      machine.advance(2, .saved, date: date, now: .seconds(3)) == .saveRetryOver(saved: true))
  }

  /// The other side: once memory holds a newer model, or a logout here removed the store's
  /// models, the retry of a model an announcement made memory forget writes nothing again; it
  /// only checks its earlier write.
  @Test func aRetryWhoseModelAnAnnouncementForgotWritesNothingAfterANewerModelOrALocalLogout() {
    for newer in [true, false] {
      var (machine, unsaved, _) = self.unsaved()
      _ = machine.signOutAnnounced(flightHoldsGrant: false)
      if newer {
        _ = machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 3)
        _ = machine.advance(
          3, .loaded(model("t9", expiresIn: 3600, refreshToken: "r9")), date: date, now: .seconds(1)
        )
      } else {
        _ = machine.signOut()
      }
      #expect(
        machine.advance(2, .backedOff, date: date, now: .seconds(1))
          == .next(.init(kind: .checkWrite(unsaved), deadline: nil)), "newer: \(newer)")
    }
  }

  @Test func aSignOutElsewhereOrACancelledTaskEndsTheRetry() {
    for outcome: Machine.StepOutcome in [.signedOutElsewhere, .waitCancelled] {
      var (machine, _, _) = self.unsaved()
      if outcome == .signedOutElsewhere {
        _ = machine.advance(2, .backedOff, date: date, now: .seconds(1))
      }
      #expect(
        machine.advance(2, outcome, date: date, now: .seconds(1)) == .saveRetryOver(saved: false))
      #expect(machine.advance(2, .backedOff, date: date, now: .seconds(2)) == .ignore)
    }
  }

  /// Found by the fleet simulation (seed 0x53 with logouts stopped before their announcement):
  /// a retried save that found the user signed out elsewhere (its grant no longer current; the
  /// save undone and announced) left the model in memory, and the process served the signed-out
  /// user's token until the logout's own announcement arrived.
  @Test func aRetryThatFindsTheUserSignedOutForgetsTheModel() {
    var (machine, unsaved, _) = self.unsaved()
    #expect(machine.cachedModel == unsaved)
    _ = machine.advance(2, .backedOff, date: date, now: .seconds(1))
    #expect(
      machine.advance(2, .signedOutElsewhere, date: date, now: .seconds(1))
        == .saveRetryOver(saved: false))
    #expect(machine.cachedModel == nil, "the signed-out user's model is never served again")
    #expect(!machine.hasUnsavedModel)
  }

  /// The retry's outcomes are the retry's even while a new flight of the key runs.
  @Test func aRetryGoesOnBesideTheKeysNextFlight() {
    var (machine, unsaved, _) = self.unsaved()
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .milliseconds(10), newFlightID: 3)
    #expect(machine.flightID == 3)
    #expect(
      machine.advance(2, .backedOff, date: date, now: .seconds(1))
        == .next(save(unsaved, attempt: 1)))
    #expect(machine.advance(2, .saved, date: date, now: .seconds(1)) == .saveRetryOver(saved: true))
    #expect(machine.flightID == 3, "the new flight is untouched")
  }
}
