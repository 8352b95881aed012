import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

@Suite(
  "PostgreSQL token store", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(2)))
struct PostgresTokenStoreTests {
  @Test("a saved model reads back equal, and a missing key reads as nil")
  func roundTrip() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let key = AccountKey(account: "alice")
    #expect(try await store.model(for: key) == nil)
    try await store.save(sampleModel(account: "alice"), for: key)
    #expect(try await store.model(for: key) == sampleModel(account: "alice"))
    try await store.save(sampleModel(account: "alice", token: "AT-2"), for: key)
    #expect(try await store.model(for: key)?.accessToken == "AT-2")
    #expect(try await store.model(for: AccountKey(account: "alice", mode: "other")) == nil)
  }

  @Test("a fenced save lands only at or above the fence that landed last; a plain save keeps it")
  func fencedSaves() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let key = AccountKey(account: "bob")
    #expect(try await store.save(sampleModel(account: "bob", token: "f5"), for: key, fence: 5))
    #expect(!(try await store.save(sampleModel(account: "bob", token: "f3"), for: key, fence: 3)))
    #expect(try await store.model(for: key)?.accessToken == "f5")
    #expect(try await store.save(sampleModel(account: "bob", token: "f5b"), for: key, fence: 5))
    try await store.save(sampleModel(account: "bob", token: "plain"), for: key)
    #expect(!(try await store.save(sampleModel(account: "bob", token: "f4"), for: key, fence: 4)))
    #expect(try await store.model(for: key)?.accessToken == "plain")
    #expect(try await store.save(sampleModel(account: "bob", token: "f9"), for: key, fence: 9))
    #expect(try await store.model(for: key)?.accessToken == "f9")
  }

  @Test("a save under a grant that a later grant took over is refused before the successor saves")
  func aDeposedHoldersSaveIsRefused() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let lease = PostgresAuthorizationLease(database: database)
    let key = AccountKey(account: "carol")
    guard
      case .acquired(let first) = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("the first acquire was refused")
      return
    }
    try await TestServer.admin(
      "UPDATE \(database.schema).leases SET expires_at = clock_timestamp() - interval '1 second'")
    guard
      case .acquired(let second) = try await lease.acquire(
        key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("the takeover was refused")
      return
    }
    #expect(second.fence > first.fence)
    #expect(
      !(try await store.save(
        sampleModel(account: "carol", token: "A"), for: key, fence: first.fence)))
    #expect(try await store.model(for: key) == nil)
    #expect(
      try await store.save(sampleModel(account: "carol", token: "B"), for: key, fence: second.fence)
    )
    #expect(try await store.model(for: key)?.accessToken == "B")
  }

  @Test("removing an account's models is one statement and leaves other accounts alone")
  func removals() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    for account in ["u1", "u2"] {
      for mode: AuthMode in ["platformOnly", "a", "b"] {
        try await store.save(
          sampleModel(account: account), for: AccountKey(account: account, mode: mode))
      }
    }
    try await store.removeModels(forAccount: "u1")
    for mode: AuthMode in ["platformOnly", "a", "b"] {
      #expect(try await store.model(for: AccountKey(account: "u1", mode: mode)) == nil)
      #expect(try await store.model(for: AccountKey(account: "u2", mode: mode)) != nil)
    }
    try await store.removeAll()
    #expect(try await store.model(for: AccountKey(account: "u2", mode: "a")) == nil)
  }

  @Test("a corrupt row reads as empty and is reported, never a crash")
  func corruptRow() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let issues = IssueLog()
    let store = PostgresTokenStore(database: database, onIssue: { issues.append($0) })
    let key = AccountKey(account: "dave")
    try await store.save(sampleModel(account: "dave"), for: key)
    for garbage in ["\\x00ff", "\\x7b7d", "\\x"] {
      try await TestServer.admin(
        "UPDATE \(database.schema).models SET model = $1::bytea", [.text(garbage)])
      #expect(try await store.model(for: key) == nil)
    }
    #expect(issues.codes == [.corruptRow, .corruptRow, .corruptRow])
    #expect(!issues.messages.contains { $0.contains("AT-1") || $0.contains("RT-1") })
    try await store.save(sampleModel(account: "dave", token: "fresh"), for: key)
    #expect(try await store.model(for: key)?.accessToken == "fresh")
  }

  @Test(
    "hostile keys and values are stored as data",
    arguments: [
      "o'brien", "\"; DROP TABLE models; --", "'); DELETE FROM models; --", "用户🙂ü",
      "10 KB", "a\\b%_*",
    ])
  func hostileKeys(label: String) async throws {
    let account = label == "10 KB" ? String(repeating: "k", count: 10_240) : label
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let key = AccountKey(account: account, mode: AuthMode(rawValue: account))
    var model = sampleModel(account: account)
    model.extraInfo = [account: account, "sql": "' OR 1=1; --"]
    try await store.save(model, for: key)
    #expect(try await store.model(for: key) == model)
    #expect(try await store.save(model, for: key, fence: 1))
    try await store.save(sampleModel(account: "bystander"), for: AccountKey(account: "bystander"))
    try await store.removeModels(forAccount: account)
    #expect(try await store.model(for: key) == nil)
    #expect(try await store.model(for: AccountKey(account: "bystander")) != nil)
  }

  @Test("a NUL in a key is refused with invalid_key, before any statement")
  func nulInAKey() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let error = await #expect(throws: PostgresError.self) {
      try await store.save(sampleModel(account: "x"), for: AccountKey(account: "a\u{0}b"))
    }
    #expect(error?.code == .invalidKey)
  }

  @Test("a sealed model is unreadable in the table and does not open on another key's row")
  func sealing() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let issues = IssueLog()
    let store = PostgresTokenStore(
      database: database, sealing: KeyBoundTestSealing(), onIssue: { issues.append($0) })
    let alice = AccountKey(account: "alice")
    let bob = AccountKey(account: "bob")
    try await store.save(sampleModel(account: "alice", token: "secret-AT"), for: alice)
    try await store.save(sampleModel(account: "bob"), for: bob)
    #expect(try await store.model(for: alice)?.accessToken == "secret-AT")
    let raw = try await TestServer.admin(
      "SELECT encode(model, 'escape') FROM \(database.schema).models")
    #expect(raw.rows.count == 2)
    #expect(!raw.rows.contains { ($0[0] ?? "").contains("secret-AT") })
    // Copy alice's sealed row onto bob's: it must not open as bob's.
    try await TestServer.admin(
      """
      UPDATE \(database.schema).models SET model = (SELECT model FROM \(database.schema).models
        WHERE account = 'alice') WHERE account = 'bob'
      """)
    #expect(try await store.model(for: bob) == nil)
    #expect(issues.codes == [.corruptRow])
  }

  @Test("the schema is created once, by concurrent replicas, and a newer one is refused")
  func migrations() async throws {
    let schema = TestServer.freshSchema()
    let databases = try await withThrowingTaskGroup(of: PostgresDatabase.self) { group in
      for _ in 0..<4 { group.addTask { try await TestServer.database(schema: schema) } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    for database in databases { database.close() }
    let versions = try await TestServer.admin("SELECT version FROM \(schema).schema_version")
    #expect(versions.rows.map { $0[0] } == [String(PostgresSchema.version)])
    try await TestServer.admin(
      "INSERT INTO \(schema).schema_version VALUES (\(PostgresSchema.version + 1))")
    let error = await #expect(throws: PostgresError.self) {
      _ = try await TestServer.database(schema: schema)
    }
    #expect(error?.code == .unsupportedSchema)
  }

  @Test(
    "a version 1 schema with models in it is migrated to the current version, and its models kept")
  func migrationFromVersion1() async throws {
    let schema = TestServer.freshSchema()
    try await TestServer.admin("CREATE SCHEMA \(schema)")
    try await TestServer.admin("CREATE TABLE \(schema).schema_version (version integer NOT NULL)")
    for statement in PostgresSchema.version1(schema).components(separatedBy: ";\n")
    where !statement.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
      try await TestServer.admin(statement)
    }
    try await TestServer.admin("INSERT INTO \(schema).schema_version VALUES (1)")
    // A model row as version 1 of the package wrote it (the row format is unchanged).
    let key = AccountKey(account: "carol")
    try await TestServer.admin(
      """
      INSERT INTO \(schema).models (key_hash, account_hash, account, mode, model)
      VALUES (sha256(convert_to($1, 'UTF8')), sha256(convert_to($2, 'UTF8')), $2, $3, $4)
      """,
      [
        .text(try KeyText.key(key)), .text("carol"), .text(key.mode.rawValue),
        .bytes(try JSONEncoder().encode(sampleModel(account: "carol"))),
      ])

    let database = try await TestServer.database(schema: schema)
    defer { database.close() }
    let versions = try await TestServer.admin("SELECT max(version) FROM \(schema).schema_version")
    #expect(versions.rows.map { $0[0] } == [String(PostgresSchema.version)])
    let store = PostgresTokenStore(database: database)
    #expect(try await store.model(for: key) == sampleModel(account: "carol"))
    let lease = PostgresAuthorizationLease(database: database, readingFrom: store)
    guard
      case .acquired(let grant) = try await lease.acquire(
        key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    #expect(grant.storeRead == .read(sampleModel(account: "carol")))
  }

  @Test(
    "bad configurations are refused with invalid_configuration",
    arguments: ["Bad", "a-b", "1x", "", "x;drop"])
  func badSchemaNames(schema: String) async throws {
    let error = await #expect(throws: PostgresError.self) {
      _ = try await PostgresDatabase(TestServer.configuration(schema: schema))
    }
    #expect(error?.code == .invalidConfiguration)
  }
}

/// What a store reported.
final class IssueLog: @unchecked Sendable {
  private let lock = NSLock()
  private var issues: [PostgresError] = []

  func append(_ issue: PostgresError) {
    lock.lock()
    issues.append(issue)
    lock.unlock()
  }

  var codes: [PostgresError.Code] {
    lock.lock()
    defer { lock.unlock() }
    return issues.map(\.code)
  }

  var messages: [String] {
    lock.lock()
    defer { lock.unlock() }
    return issues.map(\.description)
  }
}

/// A TEST-ONLY sealing: XOR with a fixed pad and a tag that binds the key. It shows the hook's
/// contract (unreadable at rest, refuses another key's row); it is not encryption.
struct KeyBoundTestSealing: ModelSealing {
  func seal(_ plaintext: Data, for key: AccountKey) throws -> Data {
    Data(tag(key).utf8) + [0] + Data(plaintext.map { $0 ^ 0x5A })
  }

  func open(_ sealed: Data, for key: AccountKey) throws -> Data {
    let expected = Data(tag(key).utf8) + [0]
    // Sealed for another key: it can never be opened as this one's.
    guard sealed.starts(with: expected) else {
      throw PostgresError(.corruptRow, "sealed for another key, or changed")
    }
    return Data(sealed.dropFirst(expected.count).map { $0 ^ 0x5A })
  }

  private func tag(_ key: AccountKey) -> String { "\(key.account.utf8.count):\(key)" }
}
