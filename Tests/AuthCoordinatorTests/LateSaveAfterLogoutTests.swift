import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// The fleet simulation's seed 0x679c4, as a plain test: a holder's save of the session
/// landed after a logout elsewhere had emptied the store. Its check after the write found the
/// sign-out and undid the save, but in between the signed-out session sat in the store: another
/// process, granted the lease after the logout, read it and refreshed it, and the undo then
/// found a different model and left it, so the session lived on in its descendants. Now the
/// logout's removal marks the fences its revocation voided
/// (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``), and the store
/// refuses the late save itself: no moment exists in which another process can read it.
@Suite(.timeLimit(.minutes(1))) struct LateSaveAfterLogoutTests {
  @Test func aSaveUnderAGrantTakenBeforeALogoutElsewhereIsRefusedByTheStore() async throws {
    let store = InMemoryTokenStore()
    let lease = InMemoryAuthorizationLease()
    try await lateSaveAfterALogoutElsewhere(
      app: (store, lease), widget: (store, lease), shared: store)
  }

  /// The same with two processes' views of one store file and one lease file (two instances
  /// of each, as two processes open them).
  @Test func aSaveUnderAGrantTakenBeforeALogoutElsewhereIsRefusedByTheStoreFile() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("late-save-\(UUID().uuidString)", isDirectory: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appendingPathComponent("tokens.store")
    let leaseURL = directory.appendingPathComponent("tokens.store.lease")
    try await lateSaveAfterALogoutElsewhere(
      app: (FileTokenStore(url: url), FileAuthorizationLease(url: leaseURL)),
      widget: (FileTokenStore(url: url), FileAuthorizationLease(url: leaseURL)),
      shared: FileTokenStore(url: url))
  }

  /// The app's refresh is paused at its save while the widget logs the user out; then the save
  /// goes on. `shared` is a third view of the store, to read what it holds.
  private func lateSaveAfterALogoutElsewhere(
    app: (store: any FencedTokenStore, lease: any AuthorizationLease),
    widget: (store: any FencedTokenStore, lease: any AuthorizationLease),
    shared: any FencedTokenStore
  ) async throws {
    let key = AccountKey(account: "u1")
    // SIMULATED token server: the TestKit's shared rotation rules.
    let issuer = TestTokenIssuer()
    try await shared.save(
      issuer.login(mcUid: "u1", at: Date().addingTimeInterval(-7200)), for: key)
    // Deadlines and the lease's time to live far beyond the test's minute: the coordinators
    // run on the real clock. In one full `swift test` on a loaded machine the file variant took
    // 27.7 s and the app served a model; a 10 s store deadline passing while the app's save was
    // held (rule 10 serves the result then) or a 15 s grant lapsing are the timings that can
    // change this test's path, and neither is what it is about.
    let configuration = AuthCoordinator.Configuration(
      authorizationTimeout: .seconds(600), storeTimeout: .seconds(600),
      leaseTimeToLive: .seconds(600))
    let appStore = GatedFencedStore(app.store)
    let appAuthorizer = ScriptedAuthorizer()
    let appCoordinator = AuthCoordinator(
      store: appStore, lease: app.lease, authorizer: appAuthorizer,
      configuration: configuration)
    let widgetCoordinator = AuthCoordinator(
      store: widget.store, lease: widget.lease,
      authorizer: ClosureAuthorizer { _ in issuer.login(mcUid: "u1", at: Date()) },
      configuration: configuration)

    // The app refreshes the expired session under its grant; the server rotates the token,
    // and the app's save waits (the process is paused).
    let refreshing = Task { try await appCoordinator.authModel(for: key) }
    let call = await appAuthorizer.nextCall()
    let rotated = try issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: Date())
    call.succeed(with: rotated)
    try await appStore.gate.waitUntilHeld()

    // The widget logs the user out, all of it: revocation, removal, announcement.
    await widgetCoordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(try await shared.model(for: key) == nil)

    // The app's save lands now, under its grant from before the logout.
    appStore.gate.open()
    try await appStore.recorded.waitUntilHeld()
    appStore.recorded.open()
    do {
      let model = try await refreshing.value
      Issue.record("the app served \(model) after another process's logout")
    } catch let error as AuthCoordinatorError {
      #expect([.signedOut, .leaseLost].contains(error.code))
    }
    let saves = appStore.saves
    #expect(saves.count == 1)
    #expect(saves.first?.stored == false, "the store refused the save under a revoked grant")
    #expect(
      saves.first?.heldAfter == nil,
      "the signed-out session was readable by every process until the undo")
    #expect(try await shared.model(for: key) == nil)

    // The next request anywhere begins a new session.
    let served = try await widgetCoordinator.authModel(for: key)
    #expect(served != rotated)
    #expect(issuer.reuses == 0)
  }
}
