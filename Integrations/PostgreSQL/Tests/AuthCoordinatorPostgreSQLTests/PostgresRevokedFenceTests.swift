import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

/// Schema version 6: a revocation records the largest fence issued (`sign_outs.fence_through`),
/// and a fenced save at or below its account's mark (or everyone's) is refused in the save's
/// own statement. A holder whose result arrives after a logout elsewhere, under a grant taken
/// before it, stores nothing another replica could read and refresh (fleet simulation, seed
/// 0x679c4; the in-process test is `LateSaveAfterLogoutTests`).
@Suite(
  "PostgreSQL revoked fences", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(2)))
struct PostgresRevokedFenceTests {
  @Test("a save under a grant taken before a revocation of its account is refused")
  func aRevokedGrantsSaveIsRefused() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let lease = PostgresAuthorizationLease(database: database)
    let dora = AccountKey(account: "dora")
    let erin = AccountKey(account: "erin")
    let before = try #require(
      try await granted(lease.acquire(dora, owner: "A", timeToLive: .seconds(30))))
    let other = try #require(
      try await granted(lease.acquire(erin, owner: "B", timeToLive: .seconds(30))))
    #expect(
      try await store.save(
        sampleModel(account: "dora", token: "d1"), for: dora, fence: before.fence))

    // A logout elsewhere: revocation, removal. The holder's late save finds no row to compare
    // fences with; without the mark it landed.
    try await lease.revokeGrants(ofAccount: "dora")
    try await store.removeModels(forAccount: "dora")
    #expect(
      !(try await store.save(
        sampleModel(account: "dora", token: "d2"), for: dora, fence: before.fence)))
    #expect(
      !(try await store.save(
        sampleModel(account: "dora", token: "d2"), for: AccountKey(account: "dora", mode: "m"),
        fence: before.fence)))
    #expect(try await store.model(for: dora) == nil)

    // Another account's holder, and a grant taken after the revocation, are not affected.
    #expect(
      try await store.save(sampleModel(account: "erin", token: "e1"), for: erin, fence: other.fence)
    )
    try await lease.release(before)
    let after = try #require(
      try await granted(lease.acquire(dora, owner: "A", timeToLive: .seconds(30))))
    #expect(after.fence > before.fence)
    #expect(
      try await store.save(sampleModel(account: "dora", token: "d3"), for: dora, fence: after.fence)
    )
    #expect(try await store.model(for: dora)?.accessToken == "d3")

    // The announcement that follows does not raise the mark.
    try await lease.signOut(account: "dora", by: "C")
    let marks = try await TestServer.admin(
      "SELECT fence_through FROM \(database.schema).sign_outs WHERE account = 'dora'")
    let mark = try #require(marks.first?[0].flatMap { UInt64($0) })
    #expect(mark >= before.fence && mark < after.fence)
  }

  @Test("a revocation of everyone refuses every earlier grant's save")
  func aRevocationOfEveryoneMarksEveryAccount() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let lease = PostgresAuthorizationLease(database: database)
    let frank = AccountKey(account: "frank")
    let before = try #require(
      try await granted(lease.acquire(frank, owner: "A", timeToLive: .seconds(30))))
    try await lease.revokeAllGrants()
    try await store.removeAll()
    #expect(
      !(try await store.save(
        sampleModel(account: "frank", token: "f1"), for: frank, fence: before.fence)))
    try await lease.release(before)
    let after = try #require(
      try await granted(lease.acquire(frank, owner: "A", timeToLive: .seconds(30))))
    #expect(
      try await store.save(
        sampleModel(account: "frank", token: "f2"), for: frank, fence: after.fence))
  }

  @Test("a replica's save paused across a logout elsewhere is refused, and nothing of it is served")
  func aLateSaveAcrossReplicasIsRefused() async throws {
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .zero)
    let appDatabase = try await TestServer.database(schema: schema)
    let widgetDatabase = try await TestServer.database(schema: schema)
    defer {
      appDatabase.close()
      widgetDatabase.close()
    }
    let appStore = GatedFencedStore(PostgresTokenStore(database: appDatabase))
    let widgetStore = PostgresTokenStore(database: widgetDatabase)
    // Deadlines and the lease's time to live beyond the test's reach, as in
    // `LateSaveAfterLogoutTests`: on the real clock, a store deadline passing while the app's
    // save is held would serve its result by rule 10.
    let configuration = AuthCoordinator.Configuration(
      authorizationTimeout: .seconds(600), storeTimeout: .seconds(600),
      leaseTimeToLive: .seconds(600))
    let app = AuthCoordinator(
      store: appStore, lease: PostgresAuthorizationLease(database: appDatabase),
      authorizer: issuer.authorizer, configuration: configuration)
    let widget = AuthCoordinator(
      store: widgetStore, lease: PostgresAuthorizationLease(database: widgetDatabase),
      authorizer: issuer.authorizer, configuration: configuration)
    let key = AccountKey(account: "gina")
    try await widgetStore.save(issuer.expiredModel(for: "gina"), for: key)

    // The app refreshes under its grant; its save waits (the replica is paused).
    let refreshing = Task { try await app.authModel(for: key) }
    try await appStore.gate.waitUntilHeld()
    await widget.accountStatusChanged(.logout(account: "gina"))
    #expect(try await widgetStore.model(for: key) == nil)

    appStore.gate.open()
    try await appStore.recorded.waitUntilHeld()
    appStore.recorded.open()
    let result = await refreshing.result
    if case .success(let model) = result {
      Issue.record("the app served \(model.accessToken) after another replica's logout")
    }
    #expect(appStore.saves.map(\.stored) == [false])
    #expect(try await widgetStore.model(for: key) == nil)
    let served = try await widget.authModel(for: key)
    #expect(issuer.spent.count == 1)
    #expect(served.refreshToken != nil && !issuer.spent.contains(served.refreshToken!))
    #expect(issuer.reuses == 0)
  }

  /// The grant of an acquired attempt.
  /// The window version 6 left: a save whose statement began before a revocation committed
  /// and then waited on the lease row (behind its own holder's renewal, say) until the
  /// revocation and the logout's removal had both committed read `sign_outs` in its old
  /// snapshot, missed the mark, and landed the signed-out session (undone only by the check
  /// after the write). Since version 7 the save's statements each take a new snapshot after
  /// the waits, and it is refused.
  @Test("a save that waited on the lease row across a whole logout is refused")
  func aSaveStalledAcrossALogoutIsRefused() async throws {
    let schema = TestServer.freshSchema()
    let saverName = "saver-\(schema)"
    let saver = try await TestServer.database(schema: schema, applicationName: saverName)
    let elsewhere = try await TestServer.database(schema: schema)
    let locker = try await TestServer.lockingSession(schema: schema)
    defer {
      saver.close()
      elsewhere.close()
      locker.close()
    }
    let frank = AccountKey(account: "frank")
    let store = PostgresTokenStore(database: saver)
    let grant = try #require(
      try await granted(
        PostgresAuthorizationLease(database: saver).acquire(
          frank, owner: "A", timeToLive: .seconds(30))))
    #expect(
      try await store.save(
        sampleModel(account: "frank", token: "f1"), for: frank, fence: grant.fence))

    // The holder's next save stalls on the lease row, which another session holds locked.
    _ = try await locker.execute("BEGIN")
    _ = try await locker.execute("SELECT 1 FROM \(schema).leases FOR UPDATE")
    let save = Task {
      try await store.save(
        sampleModel(account: "frank", token: "f2", refresh: "RT-2"), for: frank,
        fence: grant.fence)
    }
    #expect(try await TestServer.waitUntilBlocked(applicationName: saverName, orDone: save))
    // Meanwhile frank logs out in another replica: revocation, then removal, both committed.
    let otherLease = PostgresAuthorizationLease(database: elsewhere)
    let otherStore = PostgresTokenStore(database: elsewhere)
    // (The mark is the database's: the revocation records it in `sign_outs`.)
    try await otherLease.revokeGrants(ofAccount: "frank")
    try await otherStore.removeModels(forAccount: "frank")
    #expect(try await otherStore.model(for: frank) == nil)
    _ = try await locker.execute("COMMIT")

    #expect(!(try await save.value), "the stalled save landed after the logout")
    #expect(try await otherStore.model(for: frank) == nil, "the signed-out session is stored")
  }

  /// The model row's wait: a save held up behind another session's lock on the key's row (a
  /// removal, another writer) while a revocation of its account commits is refused once the
  /// row is free. `save_fenced` waits for the row in a statement of its own, so its write reads
  /// the mark in a snapshot taken after the wait; a write that waited for the row itself read
  /// it in the snapshot it began with.
  @Test("a save that waited on the model row across a revocation is refused")
  func aSaveStalledOnTheModelRowAcrossARevocationIsRefused() async throws {
    let schema = TestServer.freshSchema()
    let saverName = "saver-\(schema)"
    let saver = try await TestServer.database(schema: schema, applicationName: saverName)
    let elsewhere = try await TestServer.database(schema: schema)
    let locker = try await TestServer.lockingSession(schema: schema)
    defer {
      saver.close()
      elsewhere.close()
      locker.close()
    }
    let gina = AccountKey(account: "gina")
    let store = PostgresTokenStore(database: saver)
    let grant = try #require(
      try await granted(
        PostgresAuthorizationLease(database: saver).acquire(
          gina, owner: "A", timeToLive: .seconds(30))))
    #expect(
      try await store.save(
        sampleModel(account: "gina", token: "g1"), for: gina, fence: grant.fence))

    _ = try await locker.execute("BEGIN")
    _ = try await locker.execute("SELECT 1 FROM \(schema).models FOR UPDATE")
    let save = Task {
      try await store.save(
        sampleModel(account: "gina", token: "g2", refresh: "RT-2"), for: gina,
        fence: grant.fence)
    }
    #expect(try await TestServer.waitUntilBlocked(applicationName: saverName, orDone: save))
    try await PostgresAuthorizationLease(database: elsewhere).revokeGrants(ofAccount: "gina")
    _ = try await locker.execute("COMMIT")

    #expect(!(try await save.value), "the stalled save landed after the revocation")
    #expect(try await store.model(for: gina)?.accessToken == "g1")
  }

  private func granted(_ attempt: LeaseAttempt) -> LeaseGrant? {
    if case .acquired(let grant) = attempt { return grant }
    return nil
  }
}
