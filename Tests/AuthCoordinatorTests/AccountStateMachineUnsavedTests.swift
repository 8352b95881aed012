import Foundation
import Testing

@testable import AuthCoordinator

/// Rules 21 and 22 in the state machine, without tasks: a model whose save failed is served,
/// kept unsaved, never replaced by an older stored model, and its refresh token is the one the
/// next refresh spends; a stopped refresh is abandoned once.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineUnsavedTests: StateMachineFixture {
  /// A machine whose flight 2 refreshed `t0` (refresh token `r0`) to `t1` (`r1`) and is
  /// saving `t1`.
  func machineSavingRefresh() -> (Machine, stored: AuthModel, saving: AuthModel) {
    let stored = model("t0", expiresIn: -10, refreshToken: "r0")
    let saving = model("t1", expiresIn: 3600, refreshToken: "r1")
    var machine = self.machine(holding: stored)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(stored), date: date, now: .zero)
    _ = machine.advance(2, .authorized(.success(saving)), date: date, now: .zero)
    return (machine, stored, saving)
  }

  /// A machine whose flight 2 refreshed `t0` (refresh token `r0`) to `t1` (`r1`) and whose save
  /// then failed.
  func machineWithUnsavedModel() -> (Machine, stored: AuthModel, unsaved: AuthModel) {
    var (machine, stored, unsaved) = machineSavingRefresh()
    var ending = Ending(flight: 2, result: .succeeded(unsaved))
    ending.saveRetry = .init(kind: .awaitSaveRetry(until: .seconds(1)), deadline: nil)
    #expect(machine.advance(2, .saveFailed(unsaved), date: date, now: .zero) == .end(ending))
    return (machine, stored, unsaved)
  }

  @Test func aModelWhoseSaveFailedIsServedAndKeptUnsaved() {
    var (machine, _, unsaved) = machineWithUnsavedModel()
    #expect(machine.needsSave(unsaved))
    #expect(machine.hasUnsavedModel)
    #expect(!machine.isEvictable(now: .seconds(1000)), "evicting it would lose it")
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: noNewFlight())
        == .serve(unsaved))
    machine.unsavedModelSettled(unsaved)
    #expect(!machine.needsSave(unsaved))
    #expect(!machine.isEvictable(now: .seconds(1000)), "its retry still runs")
    _ = machine.advance(2, .backedOff, date: date, now: .seconds(1))
    #expect(
      machine.advance(2, .saved, date: date, now: .seconds(1)) == .saveRetryOver(saved: false))
    #expect(machine.isEvictable(now: .seconds(1000)))
  }

  /// An hour later, when memory's model has expired, flight 3 re-reads the store and finds
  /// `stored`, the older model a failed save left behind: what it goes on with.
  func refreshAnHourLater(
    _ machine: inout Machine, finding stored: AuthModel
  ) -> Machine.AdvanceAction {
    let later = date.addingTimeInterval(3700)
    #expect(
      machine.request(.ifNeeded, date: later, now: .seconds(3700), newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(3707))))
    return machine.advance(3, .loaded(stored), date: later, now: .seconds(3700))
  }

  @Test func theNextRefreshSpendsTheUnsavedRefreshTokenNotTheStoredOne() {
    var (machine, stored, unsaved) = machineWithUnsavedModel()
    #expect(
      refreshAnHourLater(&machine, finding: stored)
        == .next(authorize(.expired, by: .seconds(3820), replacing: unsaved)))
    #expect(machine.needsSave(unsaved), "still unsaved: the retry goes on")
  }

  /// Found by the randomized stress with a slow store and refresh tokens (seed
  /// 0xa274008b6f676027, 2026-12-06): a save that ran past its deadline served and cached its
  /// model, then failed. A flight whose re-read of the store (ordered after that save) came back
  /// before the failure was reported found the older model the failed save left behind, moved
  /// memory back to it, and spent its refresh token, which the first flight had rotated. While
  /// its save is outstanding, memory's model wins over a stored one, as an unsaved one does.
  @Test func aModelWhoseSaveIsPastItsDeadlineWinsOverTheOlderStoredOne() {
    var (machine, stored, served) = machineSavingRefresh()
    #expect(machine.deadlineReached(2, phase: .save, date: date) != nil, "served at the deadline")
    // The save failed; its report has not reached the machine when the re-read's does.
    #expect(
      refreshAnHourLater(&machine, finding: stored)
        == .next(authorize(.expired, by: .seconds(3820), replacing: served)))
  }

  /// Found by the shared-lease stress with failing saves: the stored model's expiry said
  /// nothing of which model is newer (lifetimes vary), so a re-read moved memory back to the
  /// older stored model and the next refresh spent a spent refresh token. While unsaved, memory's
  /// model wins over any stored one; once settled (stored, or refused by the fence because a
  /// later holder saved), memory follows the store again.
  @Test func anUnsavedModelWinsOverAStoredOneWhateverItsExpiry() {
    var (machine, _, unsaved) = machineWithUnsavedModel()
    let olderButLonger = model("t0", expiresIn: 7200, refreshToken: "r0")
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .seconds(1), newFlightID: 3)
    let action = machine.advance(3, .loaded(olderButLonger), date: date, now: .seconds(1))
    #expect(action == .next(authorize(.forcedRefresh, by: .seconds(121), replacing: unsaved)))
    #expect(machine.needsSave(unsaved), "still unsaved: the retry goes on")
  }

  @Test func aSettledModelGivesWayToTheStore() {
    var (machine, _, unsaved) = machineWithUnsavedModel()
    machine.unsavedModelSettled(unsaved)
    let newer = model("t9", expiresIn: 7200, refreshToken: "r9")
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .seconds(1), newFlightID: 3)
    let action = machine.advance(3, .loaded(newer), date: date, now: .seconds(1))
    #expect(
      action
        == .end(Ending(flight: 3, result: .succeeded(newer), adoptedFromStore: true)))
  }

  /// Found by the fleet simulation's long run (seed 0x8c89): a process's save landed but its
  /// check after the write hung past its grant, so the save counted as failed and the model
  /// stayed unsaved; another process took the lease meanwhile, refreshed it twice and stored
  /// the result. When the first process's next flight re-read the store, memory preferred its
  /// unsaved model and the refresh spent its refresh token a second time. A stored model with
  /// a refresh token this process never handed to its authorizer is newer: memory follows it.
  @Test func aStoredModelWithARefreshTokenNeverSpentHereReplacesAnUnsavedOne() {
    var (machine, _, unsaved) = machineWithUnsavedModel()
    let newer = model("t3", expiresIn: 3600, refreshToken: "r3")
    _ = machine.request(.force(rejecting: "t1"), date: date, now: .seconds(1), newFlightID: 3)
    let action = machine.advance(3, .loaded(newer), date: date, now: .seconds(1))
    #expect(
      action == .end(Ending(flight: 3, result: .succeeded(newer), adoptedFromStore: true)))
    #expect(!machine.needsSave(unsaved), "settled: its retry ends")
    #expect(!machine.hasUnsavedModel)
  }

  /// The other side of the rule: through a chain of refreshes whose saves all failed, every
  /// model the chain replaced stays older than memory's, and none is spent again.
  @Test(arguments: ["t0", "t1"])
  func anUnsavedModelRefreshedAgainWinsOverEveryModelItsChainReplaced(found: String) {
    var (machine, stored, unsaved) = machineWithUnsavedModel()
    let later = date.addingTimeInterval(3700)
    _ = machine.request(.ifNeeded, date: later, now: .seconds(3700), newFlightID: 3)
    _ = machine.advance(3, .loaded(stored), date: later, now: .seconds(3700))
    let second = model("t2", expiresIn: 7200, refreshToken: "r2")
    _ = machine.advance(3, .authorized(.success(second)), date: later, now: .seconds(3700))
    _ = machine.advance(3, .saveFailed(second), date: later, now: .seconds(3700))
    #expect(machine.needsSave(second))
    let older = found == stored.accessToken ? stored : unsaved
    _ = machine.request(.force(rejecting: "t2"), date: later, now: .seconds(3701), newFlightID: 4)
    let action = machine.advance(4, .loaded(older), date: later, now: .seconds(3701))
    #expect(
      action == .next(authorize(.forcedRefresh, by: .seconds(3821), replacing: second)),
      "\(found) is older: the refresh spends r2")
    #expect(machine.needsSave(second), "still unsaved: the retry goes on")
  }

  @Test func aLogoutEndsTheRetry() {
    var (machine, _, unsaved) = machineWithUnsavedModel()
    _ = machine.signOut()
    #expect(!machine.needsSave(unsaved))
  }

  @Test func aSaveThatFailsAfterItsDeadlineMarksTheServedModelUnsaved() {
    var (machine, id) = machine(in: .persisting)
    #expect(machine.deadlineReached(id, phase: .save, date: date) != nil)
    #expect(!machine.needsSave(model("t2")))
    #expect(
      machine.advance(id, .saveFailed(model("t2")), date: date, now: .zero)
        == .next(.init(kind: .awaitSaveRetry(until: .seconds(1)), deadline: nil)),
      "its save is retried")
    #expect(machine.needsSave(model("t2")))
  }

  /// Found by the fleet simulation's long run (seed 0x10853): a process paused inside a save
  /// past its deadline (the model was served and cached then); a logout elsewhere removed the
  /// user's models meanwhile, and its announcement emptied memory. The write then landed, its
  /// checks after it failed, and the save reported a failure. Memory no longer held the model,
  /// so nothing was retried, and the write stayed in the store for every process to serve. The
  /// write is checked all the same, once the lease answers.
  @Test func aFailedSavePastItsDeadlineIsCheckedEvenWhenMemoryLetTheModelGo() {
    var (machine, id) = machine(in: .persisting)
    #expect(machine.deadlineReached(id, phase: .save, date: date) != nil)
    _ = machine.signOutAnnounced(flightHoldsGrant: false)
    #expect(machine.cachedModel == nil)
    #expect(
      machine.advance(id, .saveFailed(model("t2")), date: date, now: .zero)
        == .next(.init(kind: .awaitSaveRetry(until: .seconds(1)), deadline: nil)))
    #expect(!machine.needsSave(model("t2")), "memory does not take it back")
    #expect(
      machine.advance(id, .backedOff, date: date, now: .seconds(1))
        == .next(.init(kind: .checkWrite(model("t2")), deadline: nil)))
  }

  /// Found by the randomized stress under load (seed 0x5a8016f8c649661c, one million
  /// operations beside two busy loops): a save that ran past its deadline served its model,
  /// the key was evicted while the save went on, and the save then failed. Its report found no
  /// key, so no retry began, and the model, served, never reached the store (the next read
  /// brought back the model whose refresh token it had spent). The key is kept while such a
  /// save is outstanding, and while any retry of a save runs, even one memory no longer needs.
  @Test func theKeyIsKeptUntilASavePastItsDeadlineAndItsRetryAreDone() {
    var (machine, id) = machine(in: .persisting)
    #expect(machine.deadlineReached(id, phase: .save, date: date) != nil)
    let later = Duration.seconds(1_000)  // past the refresh-loop window
    #expect(!machine.isEvictable(now: later), "the save goes on, and may still fail")
    guard case .next = machine.advance(id, .saveFailed(model("t2")), date: date, now: later)
    else {
      Issue.record("a failed save past its deadline is retried")
      return
    }
    _ = machine.signOut()
    #expect(!machine.hasUnsavedModel, "a logout here took the model out of memory")
    #expect(!machine.isEvictable(now: later), "the retry still runs: its report needs the key")
    _ = machine.advance(id, .backedOff, date: date, now: later + .seconds(1))
    #expect(machine.advance(id, .saved, date: date, now: later) == .saveRetryOver(saved: false))
    #expect(machine.isEvictable(now: later), "nothing is outstanding")

    var (saving, flight) = self.machine(in: .persisting)
    #expect(saving.deadlineReached(flight, phase: .save, date: date) != nil)
    #expect(saving.advance(flight, .saved, date: date, now: later) == .ignore)
    #expect(saving.isEvictable(now: later), "its save landed")
  }

  @Test func aStoppedRefreshIsAbandonedOnceAndItsLateResultDiscarded() {
    let stale = model("t0", expiresIn: -10, refreshToken: "r0")
    var machine = self.machine(holding: stale)
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(stale), date: date, now: .zero)
    let ending = machine.deadlineReached(2, phase: .authorization, date: date)
    #expect(ending?.abandonAt == policy.maximumHold)
    #expect(machine.predecessors == [2])
    let first = machine.abandon(2)
    let second = machine.abandon(2)
    #expect(first)
    #expect(!second, "once")
    #expect(machine.predecessors.isEmpty)
    #expect(
      machine.advance(2, .authorized(.success(model("t-late"))), date: date, now: .zero)
        == .discardLateResult)
  }

  /// Found by the shared-lease stress with failing saves: a forced refresh of a valid model was
  /// stopped at its deadline, its late result's save failed, and memory did not take it because
  /// the old model expired later. The result was forgotten, the lease released, and the next
  /// refresh spent the old refresh token again. A late result whose save failed spent the
  /// newest refresh token this process knew, so memory takes it, unsaved, whatever the expiries.
  @Test func aLateResultWhoseSaveFailedIsKeptUnsavedWhateverItsExpiry() {
    let valid = model("t0", expiresIn: 7200, refreshToken: "r0")
    var machine = self.machine(holding: valid)
    _ = machine.request(.force(rejecting: "t0"), date: date, now: .zero, newFlightID: 2)
    _ = machine.advance(2, .loaded(valid), date: date, now: .zero)
    _ = machine.deadlineReached(2, phase: .authorization, date: date)
    let late = model("t1", expiresIn: 60, refreshToken: "r1")
    #expect(machine.advance(2, .authorized(.success(late)), date: date, now: .zero) != .ignore)
    #expect(
      machine.advance(2, .lateResultUnsaved(late), date: date, now: .zero)
        == .next(.init(kind: .awaitSaveRetry(until: .seconds(1)), deadline: nil)))
    #expect(machine.needsSave(late), "kept, unsaved, and its save retried")
    #expect(machine.hasUnsavedModel)
  }
}
