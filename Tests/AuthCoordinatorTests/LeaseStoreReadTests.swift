import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// A lease that reads the store while granting (``LeaseGrant/storeRead``, as the PostgreSQL
/// lease does in one round trip): the coordinator takes that read as its re-read before
/// authorizing, and reads the store no second time.
@Suite(.timeLimit(.minutes(1))) struct LeaseStoreReadTests {
  @Test func aModelReadWhileGrantingIsAdoptedWithoutASecondStoreRead() async throws {
    let clock = ManualClock()
    let store = InstrumentedStore()
    let authorizer = ScriptedAuthorizer()
    let expired = makeModel("old", clock: clock, expiresIn: -10)
    try await store.save(expired, for: u1)
    let newer = makeModel("newer", clock: clock, expiresIn: 3600)
    // Another process stores a fresh model just before this one's grant is made.
    let lease = ReadingLease(store: store.inner, now: clock.dateSource) {
      await store.inner.save(newer, for: u1)
    }
    let coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer,
      configuration: SharedLeaseTests.Rig.configuration(clock))
    let readsBefore = store.counts.withLock { $0.reads }

    #expect(try await coordinator.authModel(for: u1) == newer)
    #expect(authorizer.callCount == 0)
    // The cold read only; the re-read under the lease came with the grant.
    #expect(store.counts.withLock { $0.reads } - readsBefore == 1)
    #expect(lease.grantsWithRead == 1)
  }

  /// Rule 21's logout half: while a logout's removal has not reached the store, what a read
  /// finds for the user is not served, and a read that came with the grant is such a read.
  @Test func aModelReadWhileGrantingIsNotServedWhileALogoutsRemovalHasNotReachedTheStore()
    async throws
  {
    let clock = ManualClock()
    let inner = InMemoryTokenStore()
    let old = makeModel("old", clock: clock, expiresIn: 3600)
    await inner.save(old, for: u1)
    let lease = ReadingLease(store: inner, now: clock.dateSource) {}
    let replaced = LockedState<[AuthModel?]>([])
    let authorizer = ClosureAuthorizer { request in
      replaced.withLock { $0.append(request.replacing) }
      return makeModel("new", clock: clock, expiresIn: 3600)
    }
    let coordinator = AuthCoordinator(
      store: RemovalFailingStore(inner), lease: lease, authorizer: authorizer,
      configuration: SharedLeaseTests.Rig.configuration(clock))
    await coordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(await inner.model(for: u1) == old, "the removal failed: the store keeps it")

    #expect(try await coordinator.authModel(for: u1).accessToken == "new")
    #expect(replaced.withLock { $0 } == [nil])
    #expect(lease.grantsWithRead == 1)
  }

  @Test func aModelOfAnotherUserReadWhileGrantingIsNeverHandedOut() async throws {
    let clock = ManualClock()
    let store = InstrumentedStore()
    let authorizer = ScriptedAuthorizer()
    let stranger = makeModel("stranger", mcUid: "u2", clock: clock, expiresIn: 3600)
    let lease = ReadingLease(store: store.inner, now: clock.dateSource) {
      await store.inner.save(stranger, for: u1)
    }
    let coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer,
      configuration: SharedLeaseTests.Rig.configuration(clock))
    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    #expect(call.request.replacing == nil, "the stranger's model is not what is replaced")
    let own = makeModel("own", clock: clock, expiresIn: 3600)
    call.succeed(with: own)
    #expect(try await caller.value == own)
  }
}

/// A store whose removals throw (a logout's removal that never reaches it).
private struct RemovalFailingStore: TokenStore {
  let inner: InMemoryTokenStore
  init(_ inner: InMemoryTokenStore) { self.inner = inner }
  struct Failure: Error {}
  func model(for key: AccountKey) async throws -> AuthModel? { await inner.model(for: key) }
  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await inner.save(model, for: key)
  }
  func removeModels(forAccount account: String) async throws { throw Failure() }
  func removeAll() async throws { throw Failure() }
}

/// An ``InMemoryAuthorizationLease`` whose grants carry a read of `store` made after
/// `beforeRead` (a save by "another process"); it counts the grants that carried one.
private final class ReadingLease: AuthorizationLease, @unchecked Sendable {
  private let inner: InMemoryAuthorizationLease
  private let store: InMemoryTokenStore
  private let beforeRead: @Sendable () async -> Void
  private let lock = NSLock()
  private var reads = 0

  init(
    store: InMemoryTokenStore, now: @escaping @Sendable () -> Date,
    beforeRead: @escaping @Sendable () async -> Void
  ) {
    self.inner = InMemoryAuthorizationLease(now: now)
    self.store = store
    self.beforeRead = beforeRead
  }

  var grantsWithRead: Int { lock.withLock { reads } }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async throws
    -> LeaseAttempt
  {
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    guard case .acquired(let grant) = attempt else { return attempt }
    await beforeRead()
    let model = await store.model(for: key)
    lock.withLock { reads += 1 }
    return .acquired(
      LeaseGrant(
        key: grant.key, owner: grant.owner, fence: grant.fence, generation: grant.generation,
        expiresAt: grant.expiresAt, storeRead: .read(model)))
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async throws { await inner.release(grant) }
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool { await inner.isCurrent(grant) }
  func revokeGrants(ofAccount account: String) async throws {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async throws { await inner.revokeAllGrants() }
  func signOut(account: String, by owner: String) async throws {
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async throws { await inner.signOutAll(by: owner) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
