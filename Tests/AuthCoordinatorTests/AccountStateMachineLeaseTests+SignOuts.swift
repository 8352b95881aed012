import Foundation
import Testing

@testable import AuthCoordinator

// The cross-process flight's late results and sign-outs, tested synchronously: the refresh tokens
// stopped flights spend, and sign-outs another process announces (a part of
// `AccountStateMachineLeaseTests`, in a file of its own for its size).
extension AccountStateMachineLeaseTests {
  // MARK: - Refresh tokens are never lost

  @Test(arguments: RefreshStop.allCases)
  func aStoppedRefreshLetsItsAuthorizerFinish(_ stop: RefreshStop) {
    let (machine, ending) = self.machine(withRefreshStoppedBy: stop)
    #expect(ending.letsRefreshFinish)
    #expect(!ending.stopsWork, "cancelling a refresh could lose the rotated token")
    #expect(ending.followers == .askAgain)
    #expect(machine.flightID == nil)
    #expect(machine.predecessors == [2])
    #expect(!machine.isEvictable(now: .seconds(1000)), "a refresh is outstanding")
  }

  @Test func stopsWorkIsFalseOnlyForAStoppedRefresh() {
    let error = AuthCoordinatorError(.timedOut)
    for result: Ending.Result in [
      .timedOut(.authorization, error), .timedOut(.exchange, error), .cancelled(.lastWaiterLeft),
    ] {
      #expect(Ending(flight: 1, result: result).stopsWork)
      #expect(!Ending(flight: 1, result: result, letsRefreshFinish: true).stopsWork)
    }
    #expect(!Ending(flight: 1, result: .succeeded(model("t1")), letsRefreshFinish: true).stopsWork)
  }

  @Test func aStoppedRefreshsLateResultIsStoredThenAdopted() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    let rotated = refreshable("t1")
    #expect(
      machine.advance(2, .authorized(.success(rotated)), date: date, now: .seconds(1))
        == .next(.init(kind: .persistLateResult(rotated), deadline: nil)))
    #expect(machine.predecessors == [2], "until it is stored")
    #expect(!machine.isEvictable(now: .seconds(1000)))
    #expect(machine.cachedModel == refreshable("t0", expiresIn: 10), "not before it is stored")
    #expect(
      machine.advance(2, .lateResultSaved(rotated), date: date, now: .seconds(2)) == .ignore)
    #expect(machine.cachedModel == rotated)
    #expect(machine.predecessors.isEmpty)
    #expect(machine.isEvictable(now: .seconds(2)))
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(3), newFlightID: noNewFlight())
        == .serve(rotated))
    #expect(
      machine.advance(2, .lateResultSaved(rotated), date: date, now: .seconds(4)) == .ignore,
      "reported once")
  }

  @Test func aNewRefreshWaitsForAStoppedOneThenAdoptsItsResult() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    let rotated = refreshable("t1")
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(10), newFlightID: 3)
        == .start(flight: 3, awaitPredecessors(by: .seconds(130))))
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(11), newFlightID: noNewFlight())
        == .join(flight: 3))
    #expect(machine.predecessors == [2])
    #expect(
      machine.advance(2, .authorized(.success(rotated)), date: date, now: .seconds(12))
        == .next(.init(kind: .persistLateResult(rotated), deadline: nil)))
    #expect(machine.advance(2, .lateResultSaved(rotated), date: date, now: .seconds(13)) == .ignore)
    #expect(machine.predecessors.isEmpty)
    #expect(machine.cachedModel == rotated)
    #expect(machine.flightID == 3, "the waiting flight goes on")
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(14), newFlightID: noNewFlight())
        == .serve(rotated), "the stored result is served at once")
    #expect(
      machine.advance(3, .predecessorsFinished, date: date, now: .seconds(15))
        == .next(load(by: .seconds(22))))
    #expect(
      machine.advance(3, .loaded(rotated), date: date, now: .seconds(16))
        == .end(Ending(flight: 3, result: .succeeded(rotated), adoptedFromStore: true)))
    #expect(machine.cachedModel == rotated)
  }

  @Test func aNewRefreshUnderALeaseTakesTheLeaseOnceItsPredecessorsFinished() {
    var (machine, _) = self.machine(
      withRefreshStoppedBy: .authorizationDeadline, policy: leasePolicy)
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(10), newFlightID: 3)
        == .start(flight: 3, awaitPredecessors(by: .seconds(130))))
    #expect(
      machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
        == .next(.init(kind: .persistLateResult(refreshable("t1")), deadline: nil)))
    #expect(machine.advance(2, .lateResultSaved(nil), date: date, now: .zero) == .ignore)
    #expect(
      machine.advance(3, .predecessorsFinished, date: date, now: .seconds(20))
        == .next(acquireLease(by: nil)), "the authorization deadline is armed already")
    #expect(
      machine.advance(3, .leaseAttempted(.acquired), date: date, now: .seconds(21))
        == .next(confirm(by: .seconds(28))))
    #expect(
      machine.advance(3, .loaded(refreshable("t1")), date: date, now: .seconds(22))
        == .next(Machine.Step(kind: .releaseLease, deadline: nil)))
    #expect(
      machine.advance(3, .leaseReleased, date: date, now: .seconds(22))
        == .end(
          Ending(flight: 3, result: .succeeded(refreshable("t1")), adoptedFromStore: true)))
  }

  @Test func aPredecessorThatFailedLeavesTheNewFlightToAuthorize() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .exchangeDeadline)
    let stale = refreshable("t0", expiresIn: 10)
    _ = machine.request(.ifNeeded, date: date, now: .seconds(10), newFlightID: 3)
    #expect(
      machine.advance(2, .authorized(.failure(.init(.authorizationFailed))), date: date, now: .zero)
        == .discardLateResult)
    #expect(machine.predecessors.isEmpty)
    #expect(machine.cachedModel == stale)
    #expect(
      machine.advance(3, .predecessorsFinished, date: date, now: .seconds(20))
        == .next(load(by: .seconds(27))))
    #expect(
      machine.advance(3, .loaded(stale), date: date, now: .seconds(21))
        == .next(authorize(.expired, by: nil, replacing: stale)))
    #expect(
      machine.deadlineReached(3, phase: .authorization, date: date)?.letsRefreshFinish == true,
      "this refresh, stopped in turn, finishes too")
    #expect(machine.predecessors == [3])
  }

  @Test func aLateResultReplacesOnlyAnOlderModel() {
    // Flight 3 adopted a model from the store before flight 2's late result was stored.
    let adopted = refreshable("t5", expiresIn: 7200)
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
    _ = machine.advance(3, .predecessorsFinished, date: date, now: .zero)
    _ = machine.advance(3, .loaded(adopted), date: date, now: .zero)
    #expect(machine.cachedModel == adopted)
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    #expect(
      machine.advance(2, .lateResultSaved(refreshable("t1")), date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == adopted, "the late result expires sooner")
    #expect(machine.predecessors.isEmpty)

    // A late result that expires later replaces a valid cached model.
    var (later, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    _ = later.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
    _ = later.advance(3, .predecessorsFinished, date: date, now: .zero)
    _ = later.advance(3, .loaded(refreshable("t1")), date: date, now: .zero)
    _ = later.advance(2, .authorized(.success(adopted)), date: date, now: .zero)
    _ = later.advance(2, .lateResultSaved(adopted), date: date, now: .zero)
    #expect(later.cachedModel == adopted)
  }

  @Test func aLateResultIsAdoptedWhileTheNextFlightAuthorizesAMissingModel() {
    // Flight 3 waited, then found the store empty and authorizes; flight 2's result is stored.
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
    _ = machine.advance(3, .predecessorsFinished, date: date, now: .zero)
    #expect(
      machine.advance(3, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.expired, by: nil, replacing: nil)))
    #expect(machine.cachedModel == nil)
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    _ = machine.advance(2, .lateResultSaved(refreshable("t1")), date: date, now: .zero)
    #expect(machine.cachedModel == refreshable("t1"), "newer than nothing")
    #expect(machine.flightID == 3)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .serve(refreshable("t1")))
  }

  @Test func aLateResultSavedAsNothingChangesNothing() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .lastWaiterLeft)
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    #expect(machine.advance(2, .lateResultSaved(nil), date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == refreshable("t0", expiresIn: 10))
    #expect(machine.predecessors.isEmpty)
    #expect(machine.isEvictable(now: .zero))
  }

  // Fleet simulation, seed 0x31d2: a stopped refresh's late save found the user signed out in
  // another process (its grant no longer current) and was undone. The announcement of that
  // sign-out had not been acted on here (this process does not act on its own undo's), and
  // memory went on serving the session's previous model, which the sign-out had ended.
  @Test func aLateResultThatFindsASignOutMakesMemoryForgetTheSession() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .lastWaiterLeft)
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    #expect(machine.advance(2, .lateResultSignedOut, date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == nil, "before the fix: the signed-out session's model")
    #expect(machine.predecessors.isEmpty)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(7))), "the next request reads the store")
  }

  @Test func aLateResultThatFindsASignOutHeardHereKeepsWhatCameAfter() {
    // The sign-out was heard here first: memory was emptied then, and what it holds now came
    // after it (flight 3 read a new session from the store).
    var (machine, _) = self.machine(withRefreshStoppedBy: .lastWaiterLeft)
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    _ = machine.signOut(elsewhere: true)
    let newer = refreshable("t9", expiresIn: 7200)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
    _ = machine.advance(3, .loaded(newer), date: date, now: .zero)
    #expect(machine.cachedModel == newer)
    #expect(machine.advance(2, .lateResultSignedOut, date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == newer)
  }

  @Test(arguments: [false, true])
  func aLateResultArrivingAfterASignOutIsDiscarded(_ elsewhere: Bool) {
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    #expect(machine.signOut(elsewhere: elsewhere) == nil)
    #expect(machine.predecessors.isEmpty, "a new flight does not wait for it")
    #expect(
      machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
        == .discardLateResult)
    #expect(machine.cachedModel == nil)
    #expect(machine.isEvictable(now: .zero))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(7))))
  }

  @Test(arguments: [false, true])
  func aLateResultStoredAcrossASignOutIsNotAdopted(_ elsewhere: Bool) {
    var (machine, _) = self.machine(withRefreshStoppedBy: .authorizationDeadline)
    #expect(
      machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
        == .next(.init(kind: .persistLateResult(refreshable("t1")), deadline: nil)))
    #expect(machine.signOut(elsewhere: elsewhere) == nil)
    #expect(machine.predecessors.isEmpty)
    #expect(
      machine.advance(2, .lateResultSaved(refreshable("t1")), date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == nil)
    #expect(machine.servableModel(at: date) == nil)
    #expect(machine.isEvictable(now: .zero))
  }

  @Test(arguments: [false, true])
  func aStoppedAuthorizationThatSpendsNoRefreshTokenIsDiscarded(_ expiredModel: Bool) {
    let replacing = expiredModel ? model("t0", expiresIn: 10) : nil
    var machine = self.machine(holding: replacing)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(
      machine.advance(2, .loaded(replacing), date: date, now: .zero)
        == .next(
          authorize(replacing == nil ? .missing : .expired, by: .seconds(120), replacing: replacing)
        ))
    let ending = machine.deadlineReached(2, phase: .authorization, date: date)
    #expect(ending == Ending(flight: 2, result: .timedOut(.authorization, .init(.timedOut))))
    #expect(ending?.letsRefreshFinish == false)
    #expect(ending?.stopsWork == true)
    #expect(machine.predecessors.isEmpty)
    #expect(
      machine.advance(2, .authorized(.success(model("late"))), date: date, now: .zero)
        == .discardLateResult)
    #expect(machine.cachedModel == replacing)
    #expect(machine.isEvictable(now: .zero))
    // A new flight does not wait for it.
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(7))))
  }

  @Test func aKeyIsNotEvictableWhileARefreshIsOutstanding() {
    var (machine, _) = self.machine(withRefreshStoppedBy: .lastWaiterLeft)
    #expect(!machine.isEvictable(now: .seconds(1000)))
    _ = machine.advance(2, .authorized(.success(refreshable("t1"))), date: date, now: .zero)
    #expect(!machine.isEvictable(now: .seconds(1000)), "its result is being stored")
    _ = machine.advance(2, .lateResultSaved(refreshable("t1")), date: date, now: .zero)
    #expect(machine.isEvictable(now: .seconds(1000)))
  }

  // MARK: - Sign-outs in another process

  // A late announcement (fleet simulation, seed 0xb95): the sign-out was announced after
  // another process's grant began a newer session, whose refresh this flight is spending.
  // Before the fix every announcement stopped the flight, and its rotated token was never
  // stored.
  @Test(arguments: [FlightInProgress.authorizing, .persisting])
  func anAnnouncementLetsAFlightHoldingAGrantGoOnUntilTheGrantIsChecked(
    _ phase: FlightInProgress
  ) {
    var (machine, id) = self.machine(in: phase)
    #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: id))
    #expect(machine.flightID == id, "still in progress")
    #expect(machine.cachedModel == nil)
    // The grant was taken after the sign-out: current, the flight goes on and ends as usual.
    #expect(machine.signOutChecked(flight: id, grantCurrent: true) == nil)
    #expect(machine.flightID == id)
  }

  @Test func aFlightWhoseGrantPredatesTheSignOutStopsOnceChecked() {
    var (machine, id) = self.machine(in: .authorizing)
    #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: id))
    let ending = machine.signOutChecked(flight: id, grantCurrent: false)
    #expect(ending?.result == .cancelled(.signedOut))
    #expect(machine.flightID == nil)
    // A check that comes back after the flight ended, or for another flight, changes nothing.
    #expect(machine.signOutChecked(flight: id, grantCurrent: false) == nil)
  }

  // Fleet simulation, seed 0x490: a process read the store under its new grant, paused
  // before renewing it, and a sign-out landed meanwhile. The announcement reached it during
  // the pause; the flight then served what it had read (its callers asked before the
  // sign-out) and ended before the lease answered. The answer, "not current", found no model
  // recorded for the flight, and memory went on serving the signed-out session's token to
  // callers who asked after the sign-out.
  @Test(arguments: [false, true])
  func aModelReadUnderAGrantLaterFoundNotCurrentIsForgotten(_ readWithGrant: Bool) {
    var machine = leaseMachine(holding: model("t0", expiresIn: 10))
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    let stored = model("t4")
    if readWithGrant {
      #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: 2))
      #expect(
        machine.advance(2, .leaseAttempted(.acquiredWithRead(stored)), date: date, now: .zero)
          == .next(Machine.Step(kind: .releaseLease, deadline: nil)))
    } else {
      #expect(
        machine.advance(2, .leaseAttempted(.acquired), date: date, now: .zero)
          == .next(confirm(by: .seconds(7))))
      #expect(machine.signOutAnnounced(flightHoldsGrant: true) == .checkGrant(flight: 2))
      #expect(
        machine.advance(2, .loaded(stored), date: date, now: .zero)
          == .next(Machine.Step(kind: .releaseLease, deadline: nil)))
    }
    #expect(
      machine.advance(2, .leaseReleased, date: date, now: .zero)
        == .end(Ending(flight: 2, result: .succeeded(stored), adoptedFromStore: true)))
    #expect(machine.cachedModel == stored)
    #expect(machine.signOutChecked(flight: 2, grantCurrent: false) == nil)
    #expect(machine.cachedModel == nil, "the signed-out session's model is forgotten")
    #expect(machine.servableModel(at: date) == nil)
  }

  /// Found by the fleet simulation's long run (seeds 0x4ac70, 0x51836, 0xf0259, 0x167cd): the
  /// case above, where the callers were served before the answer came (a hung check, or one
  /// that came back in the same instant as the flight's end after a pause), and got the
  /// signed-out session's token. A flight that has its result while the check is pending now
  /// asks the lease itself before its callers get it, whether it read the model or obtained
  /// it, stored or not.
  @Test(arguments: [false, true])
  func aFlightWithItsResultAsksTheLeaseBeforeServingAfterAnAnnouncement(_ current: Bool) {
    let grant = LeaseGrant(
      key: u1, owner: "here", fence: 7, generation: 3, expiresAt: date.addingTimeInterval(15))
    // A model it read from the store.
    var reader = leaseMachine(holding: model("t0", expiresIn: 10))
    _ = reader.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    #expect(
      reader.signOutAnnounced(flightHoldsGrant: true, grant: grant) == .checkGrant(flight: 2))
    let stored = model("t4")
    _ = reader.advance(2, .leaseAttempted(.acquiredWithRead(stored)), date: date, now: .zero)
    #expect(
      reader.advance(2, .leaseReleased, date: date, now: .zero) == confirming(grant, reader))
    #expect(
      reader.deadlineReached(2, phase: .save, date: date, at: .seconds(1)) == nil,
      "another step's deadline serves nothing")
    #expect(
      reader.signOutChecked(flight: 2, grantCurrent: false) == nil, "the flight's answer ends it")
    let read = reader.advance(2, .grantConfirmed(current: current), date: date, now: .zero)
    if current {
      #expect(
        read == .end(Ending(flight: 2, result: .succeeded(stored), adoptedFromStore: true)))
      #expect(reader.cachedModel == stored)
    } else {
      guard case .end(let ending) = read else {
        Issue.record("the flight must end: \(read)")
        return
      }
      #expect(ending.result == .cancelled(.signedOut))
      #expect(!ending.adoptedFromStore, "not counted as adopted: nothing was served")
      #expect(reader.cachedModel == nil, "the signed-out session's model is forgotten")
    }
    #expect(reader.flightID == nil)

    // A model it obtained, whose save failed: its retry goes on either way.
    var (saver, id) = self.machine(in: .persisting)
    #expect(
      saver.signOutAnnounced(flightHoldsGrant: true, grant: grant) == .checkGrant(flight: id))
    #expect(
      saver.advance(id, .saveFailed(model("t2")), date: date, now: .zero)
        == confirming(grant, saver))
    // Fleet simulation, seed 0x7f371: memory holds the model unsaved meanwhile; a new request
    // is no cache hit on it, it joins the flight and gets what the answer decides.
    #expect(saver.servableModel(at: date) == nil)
    #expect(
      saver.request(.ifNeeded, date: date, now: .zero, newFlightID: noNewFlight())
        == .join(flight: id))
    let saved = saver.advance(id, .grantConfirmed(current: current), date: date, now: .zero)
    guard case .end(let ending) = saved else {
      Issue.record("the flight must end: \(saved)")
      return
    }
    #expect(ending.result == (current ? .succeeded(model("t2")) : .cancelled(.signedOut)))
    #expect(ending.saveRetry != nil, "the retry saves, or checks and undoes, its write")
    #expect(saver.needsSave(model("t2")) == current)
  }

  @Test(arguments: [FlightInProgress.loading, .rereading, .authorizing])
  func aFlightWithoutAGrantStopsAtTheAnnouncement(_ phase: FlightInProgress) {
    var (machine, id) = self.machine(in: phase)
    guard case .stopped(let ending) = machine.signOutAnnounced(flightHoldsGrant: false) else {
      Issue.record("a flight without a grant has nothing to check")
      return
    }
    #expect(ending?.flight == id)
    #expect(ending?.result == .cancelled(.signedOut))
    #expect(machine.flightID == nil)
  }

  @Test func aSignOutElsewhereDuringTheSaveCancelsTheFlight() {
    var (machine, id) = self.machine(in: .persisting)
    let action = machine.advance(id, .signedOutElsewhere, date: date, now: .zero)
    #expect(
      action
        == .end(
          Ending(flight: id, result: .cancelled(.signedOut), followers: .fail(.init(.signedOut)))))
    if case .end(let ending) = action {
      #expect(ending.stopsWork)
      if case .fail(let error) = ending.followers { #expect(error.message.contains("u1")) }
    }
    #expect(machine.flightID == nil)
    #expect(machine.cachedModel == nil, "the unsaved model is not cached")
    #expect(machine.advance(id, .saved, date: date, now: .zero) == .ignore)
    // The cache is unknown: the next request loads, and a valid model there is not "adopted".
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 5)
        == .start(flight: 5, load(by: .seconds(8))))
    #expect(
      machine.advance(5, .loaded(model("t9")), date: date, now: .seconds(2))
        == .end(Ending(flight: 5, result: .succeeded(model("t9")))))
  }

  @Test func aSignOutElsewhereLeavesTheCacheUnknown() {
    var machine = self.machine(holding: model("t1"))
    #expect(machine.signOut(elsewhere: true) == nil)
    #expect(machine.cachedModel == nil)
    #expect(machine.servableModel(at: date) == nil)
    #expect(machine.isEvictable(now: .zero))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
    #expect(
      machine.advance(2, .loaded(model("t2")), date: date, now: .zero)
        == .end(Ending(flight: 2, result: .succeeded(model("t2")))),
      "a cold load, not a re-read")

    // A forced refresh naming no token on the unknown key rejects whatever the store holds.
    var forced = self.machine(holding: model("t1"))
    _ = forced.signOut(elsewhere: true)
    _ = forced.request(.force(rejecting: nil), date: date, now: .zero, newFlightID: 2)
    #expect(
      forced.advance(2, .loaded(model("t2")), date: date, now: .zero)
        == .next(authorize(.forcedRefresh, by: .seconds(120), replacing: model("t2"))))
  }

  @Test func aSignOutDuringTheLeaseWaitFailsTheFlightsFollowers() {
    var machine = self.machine(preparing: .awaitingHolder)
    #expect(
      machine.signOut()
        == Ending(flight: 2, result: .cancelled(.signedOut), followers: .fail(.init(.signedOut))))
    #expect(machine.advance(2, .leaseHolderChanged, date: date, now: .zero) == .ignore)
    #expect(machine.cachedModel == nil)
  }
}
