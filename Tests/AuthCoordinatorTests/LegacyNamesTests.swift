import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// The store and lease requirements name an account, not `mcUid`. Code written against the
/// earlier names still compiles (with deprecation warnings) and keeps its behaviour: the new
/// requirements' deprecated defaults forward to the old ones.
///
/// The legacy types below are deprecated, as an integrator's code would be once it sees the
/// warnings; the tests reach them through ``LegacyFixtures``, a protocol whose witnesses are
/// deprecated, so the package's own build stays free of warnings.
@Suite(.timeLimit(.minutes(1))) struct LegacyNamesTests {
  let fixtures: any LegacyFixtures = Fixtures()

  @Test func aStoreWithTheOldNameIsAskedToRemoveExactlyThatUser() async throws {
    let removed = LockedState<[String]>([])
    let store = fixtures.mcUidStore(
      [u1: makeModel("u1-model"), u2: makeModel("u2-model", mcUid: "u2")], removed: removed)
    let harness = Harness(store: store)
    await harness.coordinator.accountStatusChanged(.logout(mcUid: "u1"))
    #expect(removed.withLock { $0 } == ["u1"])
    #expect(try await store.model(for: u1) == nil)
    #expect(try await store.model(for: u2) != nil, "other users stay signed in")
  }

  @Test func aStoreWithNeitherNameIsClearedThroughRemoveAll() async throws {
    let removedAll = LockedState(0)
    let store = fixtures.minimalStore(
      [u1: makeModel("u1-model"), u2: makeModel("u2-model", mcUid: "u2")], removedAll: removedAll)
    let harness = Harness(store: store)
    await harness.coordinator.accountStatusChanged(.logout(mcUid: "u1"))
    #expect(removedAll.withLock { $0 } == 1, "broader than needed, never leaves a token behind")
    #expect(try await store.model(for: u1) == nil)
  }

  @Test func aLeaseWithTheOldNamesRevokesAndSignsOutTheUser() async throws {
    let inner = InMemoryAuthorizationLease()
    let calls = LockedState<[String]>([])
    let lease = fixtures.mcUidLease(inner, calls: calls)
    var changes = inner.changes().makeAsyncIterator()
    let coordinator = AuthCoordinator(
      store: InMemoryTokenStore(), lease: lease, authorizer: ScriptedAuthorizer())
    await coordinator.accountStatusChanged(.logout(mcUid: "u1"))
    #expect(calls.withLock { $0 } == ["revokeGrants(ofMcUid: u1)", "signOut(mcUid: u1)"])
    guard case .signedOut(let account, _) = await changes.next() else {
      Issue.record("no sign-out announced")
      return
    }
    #expect(account == "u1")
  }

  @Test func theOldChangeNameBuildsTheNewOne() {
    #expect(fixtures.oldSignedOut("u1", by: "A") == .signedOut(account: "u1", by: "A"))
  }
}

/// What the tests need from code written against the earlier names.
protocol LegacyFixtures: Sendable {
  func mcUidStore(_ models: [AccountKey: AuthModel], removed: LockedState<[String]>)
    -> any TokenStore
  func minimalStore(_ models: [AccountKey: AuthModel], removedAll: LockedState<Int>)
    -> any TokenStore
  func mcUidLease(_ inner: InMemoryAuthorizationLease, calls: LockedState<[String]>)
    -> any AuthorizationLease
  func oldSignedOut(_ mcUid: String, by owner: String) -> LeaseChange
}

private struct Fixtures: LegacyFixtures {
  @available(*, deprecated)
  func mcUidStore(_ models: [AccountKey: AuthModel], removed: LockedState<[String]>)
    -> any TokenStore
  { McUidStore(models, removed: removed) }

  @available(*, deprecated)
  func minimalStore(_ models: [AccountKey: AuthModel], removedAll: LockedState<Int>)
    -> any TokenStore
  { MinimalStore(models, removedAll: removedAll) }

  @available(*, deprecated)
  func mcUidLease(_ inner: InMemoryAuthorizationLease, calls: LockedState<[String]>)
    -> any AuthorizationLease
  { McUidLease(inner: inner, calls: calls) }

  @available(*, deprecated)
  func oldSignedOut(_ mcUid: String, by owner: String) -> LeaseChange {
    .signedOut(mcUid: mcUid, by: owner)
  }
}

/// A store written for the earlier API: it implements `removeModels(forMcUid:)`.
@available(*, deprecated, message: "written against the earlier names")
private actor McUidStore: TokenStore {
  private var models: [AccountKey: AuthModel]
  private let removed: LockedState<[String]>

  init(_ models: [AccountKey: AuthModel], removed: LockedState<[String]>) {
    self.models = models
    self.removed = removed
  }

  func model(for key: AccountKey) async throws -> AuthModel? { models[key] }
  func save(_ model: AuthModel, for key: AccountKey) async throws { models[key] = model }
  func removeModels(forMcUid mcUid: String) async throws {
    removed.withLock { $0.append(mcUid) }
    models = models.filter { $0.key.mcUid != mcUid }
  }
  func removeAll() async throws { models.removeAll() }
}

/// A store written before any per-user removal existed: it implements neither name.
@available(*, deprecated, message: "written against the earlier names")
private actor MinimalStore: TokenStore {
  private var models: [AccountKey: AuthModel]
  private let removedAll: LockedState<Int>

  init(_ models: [AccountKey: AuthModel], removedAll: LockedState<Int>) {
    self.models = models
    self.removedAll = removedAll
  }

  func model(for key: AccountKey) async throws -> AuthModel? { models[key] }
  func save(_ model: AuthModel, for key: AccountKey) async throws { models[key] = model }
  func removeAll() async throws {
    removedAll.withLock { $0 += 1 }
    models.removeAll()
  }
}

/// A lease written for the earlier API: `revokeGrants(ofMcUid:)` and `signOut(mcUid:by:)`.
@available(*, deprecated, message: "written against the earlier names")
private struct McUidLease: AuthorizationLease {
  let inner: InMemoryAuthorizationLease
  let calls: LockedState<[String]>

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func isCurrent(_ grant: LeaseGrant) async -> Bool { await inner.isCurrent(grant) }
  func revokeGrants(ofMcUid mcUid: String) async {
    calls.withLock { $0.append("revokeGrants(ofMcUid: \(mcUid))") }
    await inner.revokeGrants(ofAccount: mcUid)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func signOut(mcUid: String, by owner: String) async {
    calls.withLock { $0.append("signOut(mcUid: \(mcUid))") }
    await inner.signOut(account: mcUid, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
