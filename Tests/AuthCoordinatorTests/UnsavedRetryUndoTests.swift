import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing
import TokenStore

/// Rule 21 meets rule 19: the retry of a write whose check after it could not be made. The
/// write may have landed after a sign-out elsewhere; the retry finds the sign-out and removes
/// that write, when the store still holds it. SIMULATED PROCESSES: one coordinator on an
/// ``InMemoryAuthorizationLease`` (through ``LateLease``, whose checks fail on demand), over a
/// store whose reads fail on demand; the sign-out is another process's.
@Suite(.timeLimit(.minutes(1))) struct UnsavedRetryUndoTests {
  let clock = ManualClock()
  let store = FailingStore()
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

  /// A flight whose authorizer answers after another process logged the user out (its
  /// announcement has not arrived here): its caller is served, its write lands, and its checks
  /// after the write fail (`modelUnsaved`).
  func writeAfterASignOutElsewhereWithFailingChecks(_ events: EventRecorder) async throws {
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    await inner.revokeGrants(ofAccount: "u1")
    await store.inner.removeModels(forAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    lease.failsChecks = true
    let rotated = makeModel("rotated", clock: clock, expiresIn: 3600)
    call.succeed(with: rotated)
    #expect(try await caller.value == rotated, "its caller asked before the sign-out")
    try await events.first { if case .modelUnsaved = $0 { true } else { false } }
    #expect(await store.inner.model(for: u1) == rotated, "written; not known to be current")
  }

  /// A write after a sign-out elsewhere, with both of its checks failing, then a retry that
  /// finds the sign-out but cannot read the store: in doubt, the retry undoes. Before the fix
  /// it compared the stored model with its own only when the read succeeded, and a failed read
  /// left the signed-out session in the store for good.
  @Test func aRetryThatCannotReadTheStoreUndoesItsEarlierWriteInDoubt() async throws {
    let events = EventRecorder(coordinator)
    try await writeAfterASignOutElsewhereWithFailingChecks(events)
    // The lease answers again; the store cannot be read.
    lease.failsChecks = false
    store.failsReads = true
    clock.advance(by: .seconds(1))
    try await events.first { if case .unsavedModelDropped = $0 { true } else { false } }
    #expect(
      await store.inner.model(for: u1) == nil,
      "before the fix: a failed read skipped the undo; the signed-out session stayed stored")
    #expect(lease.signOutLog == ["revoke u1", "signOut u1"], "the undo revoked and announced")
    let readFailures = events.events.filter { event in
      if case .storeFailed(key: u1, operation: .load, message: _) = event { true } else { false }
    }
    #expect(readFailures.count == 1, "the failed read is reported")
  }

  /// Found by the fleet simulation's long run (seed 0x10853): a write after a sign-out
  /// elsewhere, whose checks after it failed, and then the sign-out's announcement arrived.
  /// Memory forgot the model, as an announcement makes it, and the retry ended at its next
  /// attempt because memory no longer held the model: the write stayed in the store, and
  /// every process served the signed-out session from it. The question the failed checks left
  /// open (did the write come after a sign-out?) outlives memory's model: the retry goes on
  /// until the lease answers, and removes the write.
  @Test func aWriteInDoubtIsCheckedEvenAfterMemoryForgotItsModel() async throws {
    let events = EventRecorder(coordinator)
    try await writeAfterASignOutElsewhereWithFailingChecks(events)
    // The announcement arrives: memory forgets the model.
    lease.deliver(.signedOut(account: "u1", by: "other"))
    try await events.first { if case .signedOutElsewhere = $0 { true } else { false } }
    // The lease answers again.
    lease.failsChecks = false
    clock.advance(by: .seconds(1))
    try await events.first { if case .unsavedModelDropped = $0 { true } else { false } }
    #expect(
      await store.inner.model(for: u1) == nil,
      "before the fix: the retry ended unchecked; the signed-out session stayed stored")
    #expect(lease.signOutLog == ["revoke u1", "signOut u1"], "the undo revoked and announced")
  }

  /// Found by the fleet simulation's 1,000,000-seed run (seed 0xf382c): a sign-out elsewhere,
  /// then this process took the lease and refreshed a newer session, and its save failed
  /// (rule 21: served, kept unsaved, retried). The sign-out's announcement arrived late, after
  /// the flight ended: memory forgot the model, and the retry, finding memory no longer held
  /// it, only checked its grant (current) and ended without saving. The store kept the spent
  /// refresh token, and the next refresh would present it again (the family revoked, the user
  /// signed in again). The retry now goes on saving a model an announcement made memory
  /// forget: its check of its grant before the write decides.
  @Test func aLateAnnouncementDoesNotDropTheSaveRetryOfASessionBegunAfterTheSignOut()
    async throws
  {
    let events = EventRecorder(coordinator)
    // The sign-out, in another process; its announcement has not arrived here.
    await inner.revokeGrants(ofAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    // The newer session, stored by a third process, expired by now.
    let newer = makeModel("newer", clock: clock, expiresIn: 10)
    await store.inner.save(newer, for: u1)
    clock.advance(by: .seconds(20))
    store.failsSaves = true
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    #expect(call.request.replacing == newer)
    let rotated = makeModel("rotated", clock: clock, expiresIn: 3600)
    call.succeed(with: rotated)
    #expect(try await caller.value == rotated, "served though unsaved (rule 21)")
    try await events.first { if case .modelUnsaved = $0 { true } else { false } }
    // The late announcement, with no flight in progress: memory forgets the model.
    lease.deliver(.signedOut(account: "u1", by: "other"))
    try await events.first { if case .signedOutElsewhere = $0 { true } else { false } }
    store.failsSaves = false
    clock.advance(by: .seconds(1))
    try await events.first { event in
      switch event {
      case .unsavedModelSaved, .unsavedModelDropped: true
      default: false
      }
    }
    #expect(
      await store.inner.model(for: u1) == rotated,
      "before the fix: the retry dropped the rotation; the store kept the spent token")
    #expect(lease.signOutLog.isEmpty, "nothing undone, nothing announced")
  }

  /// A flight whose save failed while a sign-out announced elsewhere was being checked asks
  /// the lease itself before serving (`confirmGrant`), carrying its save retry. A logout here
  /// while that question hung ended the flight; when the lease answered, the machine took the
  /// answer for an outcome of the save retry that it could not have asked for, and trapped:
  /// the process crashed. The answer now reaches the retry as its start: it goes on, finds the
  /// logout, and ends with nothing stored.
  @Test func aLogoutHereWhileAFlightAsksAboutItsGrantLetsItsSaveRetryEnd() async throws {
    let events = EventRecorder(coordinator)
    await store.inner.save(makeModel("old", clock: clock, expiresIn: 10), for: u1)
    clock.advance(by: .seconds(20))
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    // A sign-out announced while the flight holds its grant; the lease's answer hangs.
    lease.checks.close()
    lease.deliver(.signedOut(account: "u1", by: "other"))
    try await lease.checks.waitUntilHeld(1)
    // The save's check before its write answers, the write fails, and the flight's own
    // question before serving hangs.
    lease.checks.close(lettingThrough: 1)
    store.failsSaves = true
    call.succeed(with: makeModel("rotated", clock: clock, expiresIn: 3600))
    try await lease.checks.waitUntilHeld(2)
    await coordinator.accountStatusChanged(.logout(account: "u1"))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut)
    // The lease answers (the logout revoked the grant): before the fix, a trap here. Then the
    // retry waits for its first attempt.
    store.failsSaves = false
    let sleepers = clock.sleeperCount
    lease.checks.open()
    await clock.waitForSleepers(sleepers + 1)
    clock.advance(by: .seconds(1))
    try await events.first { if case .unsavedModelDropped = $0 { true } else { false } }
    #expect(await store.inner.model(for: u1) == nil, "nothing of the signed-out session stored")
  }

  /// The other side: a first save (no earlier write of its own) that finds a sign-out and
  /// cannot read the store removes nothing: what the store holds is not this flight's.
  @Test func aFirstSaveThatFindsASignOutUndoesNothing() async throws {
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    await inner.revokeGrants(ofAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    // A newer session, stored by a third process after the sign-out.
    let newer = makeModel("newer", clock: clock, expiresIn: 3600)
    await store.inner.save(newer, for: u1)
    store.failsReads = true
    call.succeed(with: makeModel("late", clock: clock, expiresIn: 3600))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await caller.value }
    #expect(error?.code == .signedOut)
    #expect(await store.inner.model(for: u1) == newer, "not this flight's write: kept")
    #expect(lease.signOutLog.isEmpty, "nothing undone, nothing announced")
  }
}

/// An ``InMemoryTokenStore`` whose reads fail while ``failsReads`` is set, and whose saves
/// fail while ``failsSaves`` is set.
final class FailingStore: FencedTokenStore, @unchecked Sendable {
  let inner = InMemoryTokenStore()
  private let failing = LockedState(false)

  struct ReadFailure: Error, CustomStringConvertible {
    var description: String { "the store could not be read (simulated)" }
  }

  var failsReads: Bool {
    get { failing.withLock { $0 } }
    set { failing.withLock { $0 = newValue } }
  }

  private let failingSaves = LockedState(false)

  struct SaveFailure: Error, CustomStringConvertible {
    var description: String { "the store could not be written (simulated)" }
  }

  var failsSaves: Bool {
    get { failingSaves.withLock { $0 } }
    set { failingSaves.withLock { $0 = newValue } }
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    if failsReads { throw ReadFailure() }
    return await inner.model(for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    if failsSaves { throw SaveFailure() }
    await inner.save(model, for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    if failsSaves { throw SaveFailure() }
    return await inner.save(model, for: key, fence: fence)
  }

  func removeModel(for key: AccountKey) async throws { await inner.removeModel(for: key) }

  func removeModels(forAccount account: String) async throws {
    await inner.removeModels(forAccount: account)
  }

  func removeAll() async throws { await inner.removeAll() }
}
