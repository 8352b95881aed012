import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

/// Issue item 12, rows: one account typed in two Unicode spellings ("José" precomposed, and
/// with a combining accent) is one account. Swift compares the two strings as equal, but the
/// database compares the bytes it hashes, so every account that reaches a digest must be in
/// the form ``TokenStore/AccountKey`` keeps (Normalization Form C).
@Suite(
  "PostgreSQL: one account whatever its Unicode spelling", .enabled(if: TestServer.isAvailable),
  .timeLimit(.minutes(1)))
struct PostgresAccountSpellingTests {
  static let composed = "Jos\u{E9}"
  static let decomposed = "Jose\u{301}"
  /// (the spelling a key is made with, the spelling the account is then named with)
  static let spellings = [(composed, decomposed), (decomposed, composed)]

  @Test("the spellings are different bytes and one account to Swift")
  func theSpellingsDiffer() {
    #expect(Array(Self.composed.utf8) != Array(Self.decomposed.utf8))
    #expect(Self.composed == Self.decomposed)
    #expect(AccountKey(account: Self.decomposed).account.utf8.elementsEqual(Self.composed.utf8))
  }

  @Test(
    "a model saved under one spelling is one row, read under the other and removed by a removal that names the other",
    arguments: spellings)
  func oneRow(saved: String, named: String) async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let model = sampleModel(account: saved)
    try await store.save(model, for: AccountKey(account: saved))
    #expect(try await store.model(for: AccountKey(account: named)) == model)
    // Saved again under the other spelling: the same row, not a second one.
    try await store.save(model, for: AccountKey(account: named, mode: .platformOnly))
    let rows = try await TestServer.admin("SELECT account FROM \(database.schema).models")
    #expect(rows.rows.count == 1)
    #expect(rows.rows.first?[0].map { Array($0.utf8) } == Array(Self.composed.utf8))
    try await store.removeModels(forAccount: named)
    #expect(try await store.model(for: AccountKey(account: saved)) == nil)
    #expect(try await TestServer.admin("SELECT 1 FROM \(database.schema).models").rows.isEmpty)
  }

  @Test(
    "the lease holds one key for both spellings, and a revocation or sign-out that names the other spelling ends its grants and back-offs",
    arguments: spellings)
  func oneLeaseKey(held: String, named: String) async throws {
    let schema = TestServer.freshSchema()
    let one = try await TestServer.database(schema: schema)
    let two = try await TestServer.database(schema: schema)
    defer {
      one.close()
      two.close()
    }
    let holder = PostgresAuthorizationLease(database: one)
    let other = PostgresAuthorizationLease(database: two)
    guard
      case .acquired(let grant) = try await holder.acquire(
        AccountKey(account: held), owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    let attempt = try await other.acquire(
      AccountKey(account: named), owner: "B", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, _) = attempt else {
      Issue.record("a second grant of one account: \(attempt)")
      return
    }
    #expect(owner == "A")

    try await holder.revokeGrants(ofAccount: named)
    #expect(try await !holder.isCurrent(grant))
    #expect(try await !other.isCurrent(grant))

    // A back-off of the key ends with a sign-out that names the other spelling.
    try await holder.release(
      grant, backingOff: LeaseBackOff(duration: .seconds(3600), failures: 1, code: "network_error"))
    let changes = other.changes()
    #expect(await first(of: changes) { $0 == .unknown } == .unknown)
    try await holder.signOut(account: named, by: "A")
    let heard = await first(of: changes) {
      if case .signedOut = $0 { return true }
      return false
    }
    guard case .signedOut(let account, _) = heard else {
      Issue.record("no sign-out heard: \(String(describing: heard))")
      return
    }
    #expect(Array(account.utf8) == Array(Self.composed.utf8))
    let next = try await other.acquire(
      AccountKey(account: held), owner: "B", timeToLive: .seconds(30))
    guard case .acquired = next else {
      Issue.record("still refused after the sign-out: \(next)")
      return
    }
  }
}
