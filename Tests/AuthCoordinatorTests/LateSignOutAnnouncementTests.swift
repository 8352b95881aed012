import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Rule 19 when the announcement is late. SIMULATED PROCESSES: one coordinator on an
/// ``InMemoryAuthorizationLease`` whose change notices this test delivers by hand, as a file
/// watcher or a database's `NOTIFY` delivers them late; the sign-out is another process's.
///
/// The fleet simulation found it (seed 0xb95, docs/reliability.md): a logout revoked, removed and
/// was then stopped before its announcement; meanwhile another process began a newer session, and
/// this one took the lease after the sign-out and spent that session's refresh token. The late
/// announcement stopped its flight as if its session were the signed-out one: the rotated token
/// was never stored, and the store kept the spent one.
@Suite(.timeLimit(.minutes(1))) struct LateSignOutAnnouncementTests {
  let clock = ManualClock()
  let store = InMemoryTokenStore()
  let inner: InMemoryAuthorizationLease
  let lease: LateLease
  let authorizer = ScriptedAuthorizer()
  let coordinator: AuthCoordinator

  init() {
    inner = InMemoryAuthorizationLease(now: clock.dateSource)
    lease = LateLease(inner)
    coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer,
      configuration: SharedLeaseTests.Rig.configuration(clock))
  }

  /// Waits until the coordinator has handled an announcement of a sign-out elsewhere.
  func announce(_ change: LeaseChange) async {
    let events = coordinator.events
    lease.deliver(change)
    for await event in events {
      if case .signedOutElsewhere = event { return }
    }
  }

  @Test func aLateAnnouncementDoesNotStopTheRefreshOfASessionBegunAfterTheSignOut()
    async throws
  {
    // The sign-out, in another process; its announcement has not arrived here.
    await inner.revokeGrants(ofAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    // The newer session, stored by a third process, expired by now.
    let newer = makeModel("newer", clock: clock, expiresIn: 10)
    await store.save(newer, for: u1)
    let caller = Task { try await coordinator.authModel(for: u1) }
    // This process took the lease after the sign-out: its grant is current.
    let call = await authorizer.nextCall()
    #expect(call.request.replacing == newer)
    await announce(.signedOut(account: "u1", by: "other"))
    let rotated = makeModel("rotated", clock: clock, expiresIn: 3600)
    call.succeed(with: rotated)
    #expect(try await caller.value == rotated, "before the fix: signed_out")
    #expect(await store.model(for: u1) == rotated, "the rotation is stored, not lost")
  }

  @Test func anAnnouncementStopsAFlightWhoseGrantPredatesTheSignOutBeforeItsResult()
    async throws
  {
    let old = makeModel("old", clock: clock, expiresIn: 10)
    await store.save(old, for: u1)
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    // The logout in another process: revoke, remove, announce.
    await inner.revokeGrants(ofAccount: "u1")
    await store.removeModels(forAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    await announce(.signedOut(account: "u1", by: "other"))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut, "stopped without waiting for the authorizer")
    await call.waitUntilCancelled()
    #expect(await store.model(for: u1) == nil)
  }

  // Found by testing the gap named last stop: the flight has its result and asks the lease
  // about its grant before serving (a sign-out was announced while it held it), and the lease
  // hangs. The callers, without a timeout of their own, waited for good. The question now has
  // a deadline of its own (the store timeout): past it, in doubt, not current.
  @Test func aHungQuestionAboutTheGrantBeforeServingEndsAtItsDeadline() async throws {
    await store.save(makeModel("old", clock: clock, expiresIn: 10), for: u1)
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    lease.checks.close()
    await announce(.signedOut(account: "u1", by: "other"))
    try await lease.checks.waitUntilHeld(1)
    // The save's checks before and after its write answer; the flight's own question hangs.
    lease.checks.close(lettingThrough: 2)
    call.succeed(with: makeModel("fresh", clock: clock, expiresIn: 3600))
    try await lease.checks.waitUntilHeld(2)
    // Past the store timeout (10 s), not the authorization's (120 s). The deadline scheduler's
    // sleeper, armed before the question was asked, wakes at once if it sleeps only now.
    clock.advance(by: .seconds(11))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut, "in doubt, not current; before the fix: no end")
    lease.checks.open()
  }

  // In doubt, a logout wins: the lease cannot say whether the grant predates the sign-out
  // (its check throws), and the flight stops as it would have without the check.
  @Test func aGrantCheckThatFailsStopsTheFlight() async throws {
    await inner.revokeGrants(ofAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    let newer = makeModel("newer", clock: clock, expiresIn: 10)
    await store.save(newer, for: u1)
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    lease.failsChecks = true
    let events = coordinator.events
    await announce(.signedOut(account: "u1", by: "other"))
    // The failed check is reported; then the authorizer answers. Had the flight gone on, its
    // caller would get this model.
    _ = await events.first { if case .storeFailed(_, .lease, _) = $0 { true } else { false } }
    call.succeed(with: makeModel("rotated", clock: clock, expiresIn: 3600))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut)
    #expect(await store.model(for: u1) == newer, "nothing of the stopped flight is stored")
  }

  // Found by the fleet simulation once store and lease operations could hang (seed 0x855): a
  // save's check of its grant after the write hung, and it held the account's store turn. A
  // logout in the same process waited behind it for the removal (and for the revocation and the
  // announcement that come with it), returned after the store timeout with nothing removed, and
  // other processes went on reading the signed-out session from the store and refreshing it.
  @Test func aHungGrantCheckAfterASaveDoesNotHoldBackALogout() async throws {
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    lease.checks.close(lettingThrough: 1)
    call.succeed(with: makeModel("fresh", clock: clock, expiresIn: 3600))
    // The check before the write answers; the one after it hangs.
    try await lease.checks.waitUntilHeld(1)
    #expect(await store.model(for: u1) != nil, "written; its check after the write hangs")
    // The logout's removal, revocation and announcement do not wait for that check, nor for
    // the clock, which never moves here.
    let changes = inner.changes()
    let ended = LockedState(false)
    let logoutEnded = ChangeSignal()
    Task {
      await coordinator.accountStatusChanged(.logout(account: "u1"))
      ended.withLock { $0 = true }
      logoutEnded.changed()
    }
    do {
      try await logoutEnded.waitUntil { ended.withLock { $0 } }
    } catch {
      // Before the fix: the logout waits for its store timeout, which this clock never reaches.
      Issue.record("the logout waited for the hung check after another process's write")
      lease.checks.open()
      clock.advance(by: .seconds(3600))
      _ = try? await caller.value
      return
    }
    #expect(await store.model(for: u1) == nil, "before the fix: the removal waited for the check")
    let announced = await changes.first { change in
      if case .signedOut(account: "u1", by: _) = change { true } else { false }
    }
    #expect(announced != nil, "the sign-out is announced to the other processes")
    lease.checks.open()
    _ = try? await caller.value
    #expect(await store.model(for: u1) == nil)
  }

  // Found by the fleet simulation once lease calls could fail (seed 0x50e): a sign-out landed
  // during a save, and the lease could not be read for the check after the write. In doubt
  // the grant counted as current: the signed-out session stayed in the store for good, and
  // other processes served and refreshed it. Now the model counts as unsaved (served, kept,
  // its save retried), and the retry, once the lease answers, finds the sign-out and removes
  // the write.
  @Test func aWriteWhoseCheckFailsIsUndoneOnceTheLeaseAnswers() async throws {
    let events = EventRecorder(coordinator)
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    // Another process logs the user out; its announcement has not arrived here.
    await inner.revokeGrants(ofAccount: "u1")
    await store.removeModels(forAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    // From here the lease cannot be read: the checks before and after the write fail.
    lease.failsChecks = true
    let rotated = makeModel("rotated", clock: clock, expiresIn: 3600)
    call.succeed(with: rotated)
    #expect(try await caller.value == rotated, "its caller asked before the sign-out")
    #expect(await store.model(for: u1) == rotated, "written; not known to be current")
    let announcements = LockedState(0)
    let announced = ChangeSignal()
    let changes = inner.changes()
    let watcher = Task {
      for await change in changes {
        guard case .signedOut(account: "u1", by: let owner) = change, owner != "other" else {
          continue
        }
        announcements.withLock { $0 += 1 }
        announced.changed()
      }
    }
    defer { watcher.cancel() }
    do {
      try await events.first { if case .modelUnsaved = $0 { true } else { false } }
    } catch {
      Issue.record("before the fix: the write whose check failed counted as saved")
      return
    }
    lease.failsChecks = false
    clock.advance(by: .seconds(1))
    try await announced.waitUntil { announcements.withLock { $0 } == 1 }
    #expect(await store.model(for: u1) == nil, "the retry found the sign-out and undid the write")
  }

  // Fleet simulation, seed 0x1dbe: a save landed after a logout elsewhere (its check before the
  // write could not be made), and its check after the write took a while. Meanwhile another
  // process, granted the lease after the sign-out, read that model and refreshed it. The undo
  // removed the model and announced; the other process's save then landed under its grant,
  // still current, and the signed-out session stayed in the store for good. The undo now
  // revokes the user's grants before it removes, as a logout does, so that save is refused.
  @Test func anUndoRevokesTheUsersGrantsBeforeItRemoves() async throws {
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    // A logout in another process; its announcement has not arrived here.
    await inner.revokeGrants(ofAccount: "u1")
    await store.removeModels(forAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    // The check before the write fails (in doubt, current); the one after it answers.
    lease.failNextChecks(1)
    call.succeed(with: makeModel("late", clock: clock, expiresIn: 3600))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut)
    #expect(await store.model(for: u1) == nil, "undone")
    #expect(lease.signOutLog == ["revoke u1", "signOut u1"], "before the fix: no revocation")
  }
}
