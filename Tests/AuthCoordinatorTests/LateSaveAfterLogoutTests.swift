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
  /// A view of a shared ``InMemoryTokenStore`` whose fenced saves wait at `gate`, and which
  /// records each fenced save's answer and what the shared store held for the key right after,
  /// then waits at `recorded` (so that a test knows the save is done).
  final class GatedSaveStore: FencedTokenStore {
    let inner: InMemoryTokenStore
    let gate: Gate
    let recorded = Gate(closed: true)
    let saves = LockedState<[(stored: Bool, heldAfter: AuthModel?)]>([])

    init(_ inner: InMemoryTokenStore, gate: Gate) {
      self.inner = inner
      self.gate = gate
    }

    func model(for key: AccountKey) async throws -> AuthModel? { await inner.model(for: key) }
    func save(_ model: AuthModel, for key: AccountKey) async throws {
      await inner.save(model, for: key)
    }
    func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
      await gate.pass()
      let stored = await inner.save(model, for: key, fence: fence)
      let heldAfter = await inner.model(for: key)
      saves.withLock { $0.append((stored, heldAfter)) }
      await recorded.pass()
      return stored
    }
    func removeModels(forAccount account: String) async throws {
      await inner.removeModels(forAccount: account)
    }
    func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64) async {
      await inner.removeModels(forAccount: account, refusingFencesThrough: fence)
    }
    func removeAll() async throws { await inner.removeAll() }
  }

  @Test func aSaveUnderAGrantTakenBeforeALogoutElsewhereIsRefusedByTheStore() async throws {
    let key = AccountKey(account: "u1")
    let shared = InMemoryTokenStore()
    let lease = InMemoryAuthorizationLease()
    // SIMULATED token server: the TestKit's shared rotation rules.
    let issuer = TestTokenIssuer()
    await shared.save(issuer.login(mcUid: "u1", at: Date().addingTimeInterval(-7200)), for: key)
    let configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(60))
    let gate = Gate(closed: true)
    let appStore = GatedSaveStore(shared, gate: gate)
    let appAuthorizer = ScriptedAuthorizer()
    let app = AuthCoordinator(
      store: appStore, lease: lease, authorizer: appAuthorizer, configuration: configuration)
    let widget = AuthCoordinator(
      store: shared, lease: lease,
      authorizer: ClosureAuthorizer { _ in issuer.login(mcUid: "u1", at: Date()) },
      configuration: configuration)

    // The app refreshes the expired session under its grant; the server rotates the token,
    // and the app's save waits (the process is paused).
    let refreshing = Task { try await app.authModel(for: key) }
    let call = await appAuthorizer.nextCall()
    let rotated = try issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: Date())
    call.succeed(with: rotated)
    try await gate.waitUntilHeld()

    // The widget logs the user out, all of it: revocation, removal, announcement.
    await widget.accountStatusChanged(.logout(account: "u1"))
    #expect(await shared.model(for: key) == nil)

    // The app's save lands now, under its grant from before the logout.
    gate.open()
    try await appStore.recorded.waitUntilHeld()
    appStore.recorded.open()
    do {
      let model = try await refreshing.value
      Issue.record("the app served \(model) after another process's logout")
    } catch let error as AuthCoordinatorError {
      #expect([.signedOut, .leaseLost].contains(error.code))
    }
    let saves = appStore.saves.withLock { $0 }
    #expect(saves.count == 1)
    #expect(saves.first?.stored == false, "the store refused the save under a revoked grant")
    #expect(
      saves.first?.heldAfter == nil,
      "the signed-out session was readable by every process until the undo")
    #expect(await shared.model(for: key) == nil)

    // The next request anywhere begins a new session.
    let served = try await widget.authModel(for: key)
    #expect(served != rotated)
    #expect(issuer.reuses == 0)
  }
}
