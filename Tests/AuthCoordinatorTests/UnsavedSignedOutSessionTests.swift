import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing
import TokenStore

/// Rule 21 meets rule 19 before a token request: memory's unsaved model is preferred over an
/// older stored one only while the session it belongs to is not signed out. Found by the fleet
/// simulation's 400,000-seed run (seed 0x47143). SIMULATED PROCESSES: one coordinator on an
/// ``InMemoryAuthorizationLease`` (through ``LateLease``: the sign-out's announcement never
/// arrives unless delivered, and its checks can fail), over a store whose saves fail on demand;
/// the sign-out is another process's.
@Suite(.timeLimit(.minutes(1))) struct UnsavedSignedOutSessionTests {
  let clock = ManualClock()
  let store = FailingStore()
  let inner: InMemoryAuthorizationLease
  let lease: LateLease
  let authorizer = ScriptedAuthorizer()
  let coordinator: AuthCoordinator

  init() {
    inner = InMemoryAuthorizationLease(now: clock.dateSource)
    lease = LateLease(inner)
    var configuration = SharedLeaseTests.Rig.configuration(clock)
    // The save retry's first attempt comes after the hold it keeps lapsed (below).
    configuration.saveRetryDelay = .seconds(60)
    coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer, configuration: configuration)
  }

  /// A session begun here whose save failed: served, kept unsaved, its save retried under
  /// the flight's lease. Returns the unsaved model.
  func unsavedModel(_ events: EventRecorder) async throws -> AuthModel {
    store.failsSaves = true
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    let unsaved = makeModel("unsaved", clock: clock, expiresIn: 3600)
    call.succeed(with: unsaved)
    #expect(try await caller.value == unsaved, "served though unsaved (rule 21)")
    try await events.first { if case .modelUnsaved = $0 { true } else { false } }
    return unsaved
  }

  /// The retry's hold lapses before its first attempt: its renewal hangs (as in seed 0x47143)
  /// past the lease's time to live, and the lease is free for the next flight. Later renewals
  /// answer.
  func holdLapses() async throws {
    lease.renewals.close()
    clock.advance(by: .seconds(20))
    try await lease.renewals.waitUntilHeld(1)
    lease.renewals.close(lettingThrough: 1_000)
  }

  /// A session begun here whose save failed, then a logout in another process: grants
  /// revoked, the store emptied, the announcement not here yet; the retry's hold lapses.
  func unsavedModelOfASessionSignedOutElsewhere(_ events: EventRecorder) async throws
    -> AuthModel
  {
    let unsaved = try await unsavedModel(events)
    await inner.revokeGrants(ofAccount: "u1")
    await store.inner.removeModels(forAccount: "u1")
    await inner.signOut(account: "u1", by: "other")
    try await holdLapses()
    return unsaved
  }

  /// The forced refresh takes the lease after the sign-out (its grant is current), reads an
  /// empty store, and before the fix preferred memory's unsaved model over it: it spent that
  /// model's refresh token and stored the signed-out session's next token under its current
  /// grant, where every process served it. Now it asks the lease about the grant the unsaved
  /// model was obtained under, finds the sign-out, and forgets the model: the authorization
  /// begins a new session, replacing nothing.
  @Test func aRefreshAfterASignOutElsewhereDoesNotSpendTheSignedOutSessionsUnsavedModel()
    async throws
  {
    defer { lease.renewals.open() }
    let events = EventRecorder(coordinator)
    let unsaved = try await unsavedModelOfASessionSignedOutElsewhere(events)
    store.failsSaves = false
    let refresh = Task {
      try await coordinator.authModel(for: u1, refresh: .force(rejecting: unsaved.accessToken))
    }
    let call = await authorizer.nextCall()
    #expect(
      call.request.replacing == nil,
      "before the fix: the signed-out session's unsaved model was handed over to be refreshed")
    let fresh = makeModel("fresh", clock: clock, expiresIn: 3600)
    call.succeed(with: fresh)
    #expect(try await refresh.value == fresh)
    #expect(await store.inner.model(for: u1) == fresh, "a new session, stored")
  }

  /// The other side: with no sign-out since its grant, the unsaved model is still the newest
  /// the process knows, and the refresh spends its refresh token (not the store's older one).
  @Test func withNoSignOutTheUnsavedModelIsRefreshed() async throws {
    defer { lease.renewals.open() }
    let events = EventRecorder(coordinator)
    let unsaved = try await unsavedModel(events)
    try await holdLapses()
    store.failsSaves = false
    let refresh = Task {
      try await coordinator.authModel(for: u1, refresh: .force(rejecting: unsaved.accessToken))
    }
    let call = await authorizer.nextCall()
    #expect(call.request.replacing == unsaved, "the newest refresh token this process knows")
    let next = makeModel("next", clock: clock, expiresIn: 3600)
    call.succeed(with: next)
    #expect(try await refresh.value == next)
    #expect(await store.inner.model(for: u1) == next)
  }

  /// In doubt (the lease cannot say whether the sign-out came after the unsaved model's
  /// grant), the refresh spends nothing: forgetting the model would spend the store's older
  /// refresh token again, keeping it might refresh a signed-out session. The callers get a
  /// clear error, memory keeps the model, and the next request asks again.
  @Test func whenTheLeaseCannotAnswerTheRefreshSpendsNothing() async throws {
    defer { lease.renewals.open() }
    let events = EventRecorder(coordinator)
    let unsaved = try await unsavedModelOfASessionSignedOutElsewhere(events)
    store.failsSaves = false
    lease.failsChecks = true
    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await coordinator.authModel(for: u1, refresh: .force(rejecting: unsaved.accessToken))
    }
    #expect(error?.code == .storeFailed)
    #expect(authorizer.callCount == 1, "no token request in doubt")
    lease.failsChecks = false
    let refresh = Task {
      try await coordinator.authModel(for: u1, refresh: .force(rejecting: unsaved.accessToken))
    }
    let call = await authorizer.nextCall()
    #expect(call.request.replacing == nil, "asked again: signed out")
    let fresh = makeModel("fresh", clock: clock, expiresIn: 3600)
    call.succeed(with: fresh)
    #expect(try await refresh.value == fresh)
  }
}
