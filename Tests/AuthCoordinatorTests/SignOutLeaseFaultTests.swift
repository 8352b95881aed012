import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// A logout while the lease's storage is down: the revocation of the user's grants and the
/// sign-out's announcement both throw. SIMULATED PROCESSES: coordinators in this test process
/// share one store and one ``InMemoryAuthorizationLease`` (wrapped to fail its sign-outs), on a
/// manual clock.
@Suite(.timeLimit(.minutes(1))) struct SignOutLeaseFaultTests {
  /// Another process's flight, begun before the logout, holds a grant the failed revocation
  /// left current: its checks before and after its save pass, and its result lands in the store
  /// after the logout's removal. The process that logged out must not serve it: its logout did
  /// not take effect in the lease, as one whose removal failed did not in the store (rule 19).
  /// A later logout that succeeds (of the same kind) lifts that: what the store holds is
  /// served again.
  @Test(arguments: [AccountStatusChange.logout(account: "u1"), .logoutAll])
  func aLateResultStoredWhileTheRevocationFailedIsNotServedByTheProcessThatLoggedOut(
    _ change: AccountStatusChange
  ) async throws {
    let rig = await SharedLeaseTests.Rig(processes: 1, storing: .expired)
    let failing = SignOutFailingLease(rig.lease)
    let configuration = SharedLeaseTests.Rig.configuration(rig.clock)
    let app = AuthCoordinator(
      store: rig.store, lease: failing, authorizer: rig.authorizer, configuration: configuration)
    let widget = AuthCoordinator(
      store: rig.store, lease: failing, authorizer: rig.authorizer, configuration: configuration)
    let appEvents = EventRecorder(app)

    let widgetCaller = rig.request(widget)
    let widgetCall = await rig.authorizer.nextCall()
    failing.failSignOuts(true)
    await app.accountStatusChanged(change)
    #expect(failing.failedSignOuts == 2, "the revocation and the announcement failed")
    try await appEvents.first {
      if case .storeFailed(_, .lease, _) = $0 { true } else { false }
    }

    // The widget never heard of the logout: its result passes its checks and is stored.
    let late = makeModel("late-login", clock: rig.clock, expiresIn: 3600)
    widgetCall.succeed(with: late)
    _ = try? await widgetCaller.value
    #expect(await rig.store.model(for: u1) == late)
    failing.failSignOuts(false)

    // The app signed the user out: it asks for a new login, whatever the store now holds.
    let next = rig.request(app)
    let answerer = Task { [authorizer = rig.authorizer, clock = rig.clock] in
      let call = await authorizer.nextCall()
      call.succeed(with: makeModel("next-login", clock: clock, expiresIn: 3600))
      return call.request.replacing
    }
    #expect(try await next.value.accessToken == "next-login")
    // (Served from the store instead, it would never call the authorizer: no wait for that.)
    if rig.authorizer.callCount == 2 {
      #expect(await answerer.value == nil, "nothing of the signed-out session is refreshed")
    }

    // A logout that succeeds takes effect: a model stored afterwards is served from the store.
    await app.accountStatusChanged(change)
    #expect(failing.failedSignOuts == 2)
    let stored = makeModel("stored-after", clock: rig.clock, expiresIn: 3600)
    await rig.store.save(stored, for: u1)
    let reauthorizer = Task { [authorizer = rig.authorizer, clock = rig.clock] in
      await authorizer.nextCall().succeed(
        with: makeModel("authorized-again", clock: clock, expiresIn: 3600))
    }
    #expect(try await rig.request(app).value == stored, "the record was lifted")
    reauthorizer.cancel()
  }
}

/// A lease whose sign-outs (revocations and announcements) throw while the test says so: its
/// storage down during a logout.
final class SignOutFailingLease: ForwardingLease, @unchecked Sendable {
  struct Failure: Error {}
  let inner: InMemoryAuthorizationLease
  private let state = LockedState((failing: false, failed: 0))

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  func failSignOuts(_ failing: Bool) { state.withLock { $0.failing = failing } }
  var failedSignOuts: Int { state.withLock { $0.failed } }

  private func check() throws {
    let fails = state.withLock { state -> Bool in
      if state.failing { state.failed += 1 }
      return state.failing
    }
    if fails { throw Failure() }
  }

  func revokeGrants(ofAccount account: String) async throws {
    try check()
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    try check()
    return await inner.revokeGrantsReportingFence(ofAccount: account)
  }
  func revokeAllGrants() async throws {
    try check()
    await inner.revokeAllGrants()
  }
  func revokeAllGrantsReportingFence() async throws -> UInt64? {
    try check()
    return await inner.revokeAllGrantsReportingFence()
  }
  func signOut(account: String, by owner: String) async throws {
    try check()
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async throws {
    try check()
    await inner.signOutAll(by: owner)
  }
}
