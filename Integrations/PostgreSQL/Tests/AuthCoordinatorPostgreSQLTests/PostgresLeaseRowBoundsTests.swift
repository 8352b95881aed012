import AuthCoordinator
import Foundation
import Synchronization
import Testing

@testable import AuthCoordinatorPostgreSQL

/// Lease rows that no version of the package writes (a grant expiring in 2999 or at
/// `infinity`, a back-off for a year, a failure count of 2,147,483,647), written with SQL as a
/// bug, a manual edit or a restore could leave them: none may keep a key from every replica for
/// longer than the lease's bounds (`PostgresSchema.maximumTimeToLiveSeconds`, `maximumBackOffSeconds`).
@Suite(
  "PostgreSQL lease rows out of bounds", .enabled(if: TestServer.isAvailable),
  .timeLimit(.minutes(2)))
struct PostgresLeaseRowBoundsTests {
  /// Writes `key`'s lease row directly, as no replica would.
  static func writeRow(
    _ schema: String, key: AccountKey, expiresAt: String, failures: String = "NULL",
    code: String = "NULL"
  ) async throws {
    try await TestServer.admin(
      """
      INSERT INTO \(schema).leases (key_hash, owner, fence, expires_at, backoff_failures, backoff_code)
      VALUES (
        sha256(convert_to($1, 'UTF8')), $2, nextval('\(schema).fences'), \(expiresAt),
        \(failures), \(code))
      """, [.text(try KeyText.key(key)), .text(failures == "NULL" ? "ghost" : "")])
  }

  @Test(
    "a grant further ahead than any grant lasts is taken over: the coordinator authorizes at once",
    arguments: [
      "'2999-01-01 00:00:00+00'::timestamptz", "'infinity'::timestamptz",
      "clock_timestamp() + interval '2 days'", "'-infinity'::timestamptz",
    ])
  func implausibleGrant(expiresAt: String) async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let key = AccountKey(account: "alice")
    try await Self.writeRow(database.schema, key: key, expiresAt: expiresAt)
    let calls = Mutex(0)
    let authorizer = ClosureAuthorizer(isInteractive: false) { request in
      calls.withLock { $0 += 1 }
      return AuthModel(
        uid: "2088-alice", accessToken: "AT-new", mcUid: request.key.account,
        expiresAt: Date().addingTimeInterval(3600))
    }
    let store = PostgresTokenStore(database: database)
    let coordinator = AuthCoordinator(
      store: store, lease: PostgresAuthorizationLease(database: database, readingFrom: store),
      authorizer: authorizer,
      configuration: AuthCoordinator.Configuration(authorizationTimeout: .seconds(5)))
    let started = ContinuousClock.now
    let model = try await coordinator.authModel(for: key)
    #expect(model.accessToken == "AT-new")
    #expect(calls.withLock { $0 } == 1)
    #expect(ContinuousClock.now - started < .seconds(4))
  }

  @Test(
    "a back-off further ahead than the longest back-off is clamped to it in the row, for good, and its failure count to 64",
    arguments: [
      ("clock_timestamp() + interval '1 year'", "3"),
      ("'infinity'::timestamptz", "2"),
      ("clock_timestamp() + interval '1 year'", "2147483647"),
      ("clock_timestamp() + interval '10 seconds'", "-7"),
    ])
  func implausibleBackOff(expiresAt: String, failures: String) async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let schema = database.schema
    let key = AccountKey(account: "bob")
    try await Self.writeRow(
      schema, key: key, expiresAt: expiresAt, failures: failures, code: "'network_error'")
    let lease = PostgresAuthorizationLease(database: database)
    let maximum = PostgresSchema.maximumBackOffSeconds
    for owner in ["A", "B"] {
      let attempt = try await lease.acquire(key, owner: owner, timeToLive: .seconds(30))
      guard case .backingOff(let until, let count, let code) = attempt else {
        Issue.record("not a back-off: \(attempt)")
        return
      }
      #expect(until.timeIntervalSinceNow <= Double(maximum) + 1)
      #expect((0...PostgresSchema.maximumFailures).contains(count))
      #expect(code == "network_error")
    }
    // The clamp is in the row, on the database's clock: it lapses on time, not an hour after
    // every look.
    let bounded = try await TestServer.admin(
      """
      SELECT expires_at <= clock_timestamp() + $1::bigint * interval '1 second'
      FROM \(schema).leases
      """, [.text(String(maximum))])
    #expect(bounded.rows == [["t"]])
    try await TestServer.admin(
      """
      UPDATE \(schema).leases
      SET expires_at = expires_at - $1::bigint * interval '1 second' - interval '1 second'
      """, [.text(String(maximum))])
    guard case .acquired = try await lease.acquire(key, owner: "C", timeToLive: .seconds(30))
    else {
      Issue.record("the clamped back-off did not lapse")
      return
    }
  }

  @Test("a back-off row without an error code is taken over, not read as a reply it cannot be")
  func backOffWithoutACode() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let key = AccountKey(account: "carol")
    try await Self.writeRow(
      database.schema, key: key, expiresAt: "clock_timestamp() + interval '10 minutes'",
      failures: "1", code: "''")
    let lease = PostgresAuthorizationLease(database: database)
    let attempt = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    guard case .acquired = attempt else {
      Issue.record("not acquired: \(attempt)")
      return
    }
  }

  @Test("a back-off released with a year and 2^62 failures is recorded within the bounds")
  func boundedWrites() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let key = AccountKey(account: "dave")
    let lease = PostgresAuthorizationLease(database: database)
    guard
      case .acquired(let grant) = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    try await lease.release(
      grant,
      backingOff: LeaseBackOff(duration: .seconds(31_557_600), failures: 1 << 62, code: "x"))
    let row = try await TestServer.admin(
      """
      SELECT backoff_failures, expires_at <= clock_timestamp() + $1::bigint * interval '1 second'
      FROM \(database.schema).leases
      """, [.text(String(PostgresSchema.maximumBackOffSeconds))])
    #expect(row.rows == [[String(PostgresSchema.maximumFailures), "t"]])
  }
}
