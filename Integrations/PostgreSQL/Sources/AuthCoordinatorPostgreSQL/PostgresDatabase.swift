import Foundation
import TokenStore

/// A PostgreSQL database that holds a fleet's models and leases: a bounded pool of
/// connections on threads of their own, and the package's schema, created or migrated when the
/// database is opened.
///
/// ```swift
/// let database = try await PostgresDatabase(
///   PostgresConfiguration(connectionString: "host=db dbname=app user=svc"))
/// let store = PostgresTokenStore(database: database)
/// let coordinator = AuthCoordinator(
///   store: store,
///   lease: PostgresAuthorizationLease(database: database, readingFrom: store),
///   authorizer: authorizer)
/// ```
///
/// Open one per process and share it between the store and the lease; ``close()`` it when the
/// process is done with it.
public final class PostgresDatabase: Sendable {
  /// The settings it was opened with (its description hides the connection string).
  public let configuration: PostgresConfiguration
  let pool: PostgresPool
  let redactor: Redactor
  /// The schema, as a validated identifier.
  var schema: String { configuration.schema }

  /// Connects, and creates or migrates the schema.
  ///
  /// - Throws: ``PostgresError`` with `invalid_configuration`, `connection_failed`,
  ///   `timed_out`, `statement_failed` (say, no right to create the schema) or
  ///   `unsupported_schema` (a newer version of this package migrated it).
  public init(_ configuration: PostgresConfiguration) async throws {
    self.configuration = try configuration.validated()
    self.redactor = Redactor(
      connectionStrings: [configuration.connectionString]
        + (configuration.listenerConnectionString.map { [$0] } ?? []))
    self.pool = PostgresPool(self.configuration, redactor: redactor)
    let schema = configuration.schema
    do {
      try await pool.run { connection, deadline in
        try PostgresSchema.migrate(schema, on: connection, until: deadline)
      }
    } catch {
      pool.close()
      throw error
    }
  }

  /// Stops the pool's threads after the calls already asked for; later calls fail with
  /// `closed`. A ``PostgresAuthorizationLease``'s listener has a connection of its own: it
  /// stops within a poll interval of the lease's release.
  public func close() { pool.close() }

  /// Runs one statement on a pooled connection.
  func execute(_ sql: String, _ parameters: [PostgresValue] = []) async throws -> PostgresRows {
    try await pool.run { connection, deadline in
      try connection.execute(sql, parameters, until: deadline)
    }
  }
}

/// The text the digests of keys and accounts are computed from, with keys PostgreSQL cannot
/// store refused.
enum KeyText {
  static func key(_ key: AccountKey) throws -> String {
    try checked(key.account)
    try checked(key.mode.rawValue)
    return "\(key.account.utf8.count):\(key.account)/\(key.mode.rawValue)"
  }

  static func checked(_ text: String) throws {
    guard !text.utf8.contains(0) else {
      throw PostgresError(.invalidKey, "PostgreSQL text cannot hold a NUL character")
    }
  }

  /// Parses libpq's text form of `bytea` (`\x` and hex digits).
  static func bytes(fromHex text: String) -> Data? {
    let digits = Array(text.utf8)
    guard digits.count >= 2, digits[0] == UInt8(ascii: "\\"), digits[1] == UInt8(ascii: "x"),
      digits.count % 2 == 0
    else { return nil }
    var data = Data(capacity: (digits.count - 2) / 2)
    var index = 2
    while index < digits.count {
      guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else {
        return nil
      }
      data.append(high << 4 | low)
      index += 2
    }
    return data
  }

  private static func nibble(_ digit: UInt8) -> UInt8? {
    switch digit {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
    default: return nil
    }
  }
}
