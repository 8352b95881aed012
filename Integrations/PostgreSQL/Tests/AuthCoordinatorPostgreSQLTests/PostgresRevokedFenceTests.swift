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

  /// The grant of an acquired attempt.
  private func granted(_ attempt: LeaseAttempt) -> LeaseGrant? {
    if case .acquired(let grant) = attempt { return grant }
    return nil
  }
}
