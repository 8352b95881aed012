import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

/// The throwaway server `scripts/with-postgres.sh` started (its address in
/// `AUTHCOORD_PG_CONNINFO`); without it these suites are skipped.
enum TestServer {
  static let connectionString = ProcessInfo.processInfo.environment["AUTHCOORD_PG_CONNINFO"]
  static var isAvailable: Bool { connectionString != nil }

  /// A schema no other test uses.
  static func freshSchema() -> String {
    "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
  }

  /// A configuration for `schema`; `applicationName` lets a test find its connections in
  /// `pg_stat_activity`.
  static func configuration(
    schema: String, applicationName: String = "authcoord-tests",
    statementTimeout: Duration = .seconds(5), callTimeout: Duration = .seconds(8),
    pollInterval: ClosedRange<Duration> = .seconds(1) ... .seconds(2)
  ) -> PostgresConfiguration {
    PostgresConfiguration(
      connectionString: connectionString ?? "", schema: schema, poolSize: 2,
      statementTimeout: statementTimeout, callTimeout: callTimeout, pollInterval: pollInterval,
      reconnectDelay: .milliseconds(50) ... .milliseconds(400), applicationName: applicationName)
  }

  /// A database for a new schema (or `schema`, to share one between "replicas").
  static func database(
    schema: String = freshSchema(), applicationName: String = "authcoord-tests"
  ) async throws -> PostgresDatabase {
    try await PostgresDatabase(configuration(schema: schema, applicationName: applicationName))
  }

  /// Runs SQL as the test's administrator (the server's superuser), outside the package's API.
  @discardableResult
  static func admin(_ sql: String, _ parameters: [PostgresValue] = []) async throws
    -> PostgresRows
  {
    try await adminDatabase.value.execute(sql, parameters)
  }

  private static let adminDatabase = Task {
    try await PostgresDatabase(configuration(schema: "authcoord_admin", applicationName: "admin"))
  }

  /// Ends the server-side sessions whose application name is `name` (`pg_terminate_backend`),
  /// optionally only those whose last statement starts with `queryPrefix`; returns how many.
  /// With `waitingForExit`, returns only once each session's process has exited (up to 5 s
  /// each, PostgreSQL 14 and later), so that its goodbye is on its client's socket by then.
  static func terminate(
    applicationName name: String, queryPrefix: String? = nil, waitingForExit: Bool = false
  ) async throws -> Int {
    let terminate = waitingForExit ? "pg_terminate_backend(pid, 5000)" : "pg_terminate_backend(pid)"
    let rows = try await admin(
      """
      SELECT count(*) FILTER (WHERE \(terminate)) FROM pg_stat_activity
      WHERE application_name = $1 AND ($2::text IS NULL OR query LIKE $2::text || '%')
      """, [.text(name), queryPrefix.map { .text($0) } ?? .null])
    return rows.first?[0].flatMap { Int($0) } ?? 0
  }
}

/// Waits for the first element of `stream` that `matches`, for at most `limit` (a bound on a
/// failing test, not a wait for work to happen: the element is usually there in milliseconds).
func first<T: Sendable>(
  of stream: AsyncStream<T>, within limit: Duration = .seconds(20),
  where matches: @escaping @Sendable (T) -> Bool
) async -> T? {
  await withTaskGroup(of: T?.self) { group in
    group.addTask {
      for await element in stream where matches(element) { return element }
      return nil
    }
    group.addTask {
      try? await Task.sleep(for: limit)
      return nil
    }
    let found = await group.next() ?? nil
    group.cancelAll()
    return found
  }
}

/// A model with every field set.
func sampleModel(account: String, token: String = "AT-1", refresh: String? = "RT-1") -> AuthModel {
  AuthModel(
    uid: "2088-\(account)", accessToken: token, mcUid: account,
    expiresAt: Date(timeIntervalSinceReferenceDate: 820_000_000.123_456),
    extraInfo: ["scope": "auth_user", "quote": "it's \"fine\""], refreshToken: refresh)
}

extension TestServer {
  /// A database of one connection on `schema`, so that a test's `BEGIN` … `COMMIT` run in one
  /// session: it holds rows locked for as long as the test needs.
  static func lockingSession(schema: String) async throws -> PostgresDatabase {
    try await PostgresDatabase(
      PostgresConfiguration(connectionString: connectionString ?? "", schema: schema, poolSize: 1))
  }

  /// Polls `pg_stat_activity` (every 10 ms, at most 10 s: a bound on a failing test) until a
  /// session named `name` waits for a lock, or `task` is done; returns whether it was blocked.
  static func waitUntilBlocked<T>(
    applicationName name: String, orDone task: Task<T, any Error>
  ) async throws -> Bool {
    let done = DoneFlag()
    let watcher = Task {
      _ = try? await task.value
      done.set()
    }
    defer { watcher.cancel() }
    for _ in 0..<1_000 {
      let rows = try await TestServer.admin(
        """
        SELECT count(*) FROM pg_stat_activity
        WHERE application_name = $1 AND wait_event_type = 'Lock'
        """, [.text(name)])
      if rows.first?[0] != "0" { return true }
      if done.isSet { return false }
      try await Task.sleep(for: .milliseconds(10))
    }
    return false
  }
}

/// A flag one task sets and another polls.
final class DoneFlag: @unchecked Sendable {
  private let lock = NSLock()
  private var value = false
  func set() { lock.withLock { value = true } }
  var isSet: Bool { lock.withLock { value } }
}
