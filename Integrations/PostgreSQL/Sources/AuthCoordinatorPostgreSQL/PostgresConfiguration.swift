import Foundation

/// How to reach the database and how long to wait for it.
///
/// Its description, debug description and mirror (`dump`) show every setting but the
/// connection strings, which may hold a password.
public struct PostgresConfiguration: Sendable, CustomStringConvertible,
  CustomDebugStringConvertible, CustomReflectable
{
  /// A libpq connection string or URI (`host=db port=5432 dbname=app user=svc` or
  /// `postgresql://svc@db/app`). Its password, if any, never appears in a description, a log
  /// or an error; prefer a `~/.pgpass` file or `PGPASSWORD` anyway.
  public var connectionString: String
  /// The schema the package creates and migrates; a lowercase SQL identifier
  /// (`[a-z_][a-z0-9_]*`, at most 40 characters). Default `authcoord`.
  public var schema: String
  /// Connections for store and lease calls, each served by a thread of its own (never a
  /// thread of Swift's cooperative pool). Default 4. A lease that is subscribed to
  /// (``PostgresAuthorizationLease/changes()``) opens one more, its listener.
  public var poolSize: Int
  /// How long to wait for a connection to open (`connect_timeout`, at least 2 s in libpq's
  /// rounding). Default 5 s.
  public var connectTimeout: Duration
  /// The server's bound on each statement (`statement_timeout`) and on row locks
  /// (`lock_timeout`). Default 5 s.
  public var statementTimeout: Duration
  /// The client's bound on a whole call, time in the pool's queue included: past it the call
  /// fails with ``PostgresError/Code-swift.struct/timedOut`` and its connection is closed (a
  /// server that stopped answering cannot hold a thread). Default 8 s.
  public var callTimeout: Duration
  /// The listener's poll interval: between these two, chosen at random for each wait, it
  /// re-reads the sign-outs and announces ``TokenStore/LeaseChange/unknown`` so that a waiter
  /// re-tries the lease even when a notification was lost. Default 1-2 s.
  public var pollInterval: ClosedRange<Duration>
  /// The first and the longest wait before reconnecting after a failed connection; each
  /// failure doubles the wait, with jitter. Default 100 ms to 5 s.
  public var reconnectDelay: ClosedRange<Duration>
  /// The `application_name` the server shows for these connections.
  public var applicationName: String
  /// Whether the lease's listener `LISTEN`s (default); `false` leaves it polling only, every
  /// ``pollInterval`` (for a connection pooler in transaction mode, where `LISTEN` does not
  /// work, and to measure what notifications save).
  public var listens: Bool
  /// The lease listener's own connection string, when it must differ from
  /// ``connectionString``: `LISTEN` needs a session, so behind PgBouncer in transaction mode
  /// point the pool at the pooler and the listener at the database (or at PgBouncer in session
  /// mode). `nil` (default): the listener uses ``connectionString``. Its password is redacted
  /// as that one's is.
  public var listenerConnectionString: String?

  /// Creates a configuration.
  public init(
    connectionString: String,
    schema: String = "authcoord",
    poolSize: Int = 4,
    connectTimeout: Duration = .seconds(5),
    statementTimeout: Duration = .seconds(5),
    callTimeout: Duration = .seconds(8),
    pollInterval: ClosedRange<Duration> = .seconds(1) ... .seconds(2),
    reconnectDelay: ClosedRange<Duration> = .milliseconds(100) ... .seconds(5),
    applicationName: String = "authcoordinator",
    listens: Bool = true,
    listenerConnectionString: String? = nil
  ) {
    self.connectionString = connectionString
    self.schema = schema
    self.poolSize = poolSize
    self.connectTimeout = connectTimeout
    self.statementTimeout = statementTimeout
    self.callTimeout = callTimeout
    self.pollInterval = pollInterval
    self.reconnectDelay = reconnectDelay
    self.applicationName = applicationName
    self.listens = listens
    self.listenerConnectionString = listenerConnectionString
  }

  /// The configuration the lease's listener connects with.
  var forListener: PostgresConfiguration {
    var listener = self
    if let listenerConnectionString { listener.connectionString = listenerConnectionString }
    return listener
  }

  /// Schema, pool and time limits; never the connection string (it may hold a password).
  public var description: String {
    "PostgresConfiguration(schema: \(schema), poolSize: \(poolSize), "
      + "connectTimeout: \(connectTimeout), statementTimeout: \(statementTimeout), "
      + "callTimeout: \(callTimeout), connection: <redacted>)"
  }

  /// The same as ``description``: never the connection string.
  public var debugDescription: String { description }

  /// Every setting, with the connection strings shown as `<redacted>`, so that `dump` shows no
  /// password.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "connectionString": Redactor.replacement, "schema": schema, "poolSize": poolSize,
        "connectTimeout": connectTimeout, "statementTimeout": statementTimeout,
        "callTimeout": callTimeout, "pollInterval": pollInterval,
        "reconnectDelay": reconnectDelay, "applicationName": applicationName,
        "listens": listens,
        "listenerConnectionString": listenerConnectionString.map { _ in Redactor.replacement }
          as Any,
      ], displayStyle: .struct)
  }

  /// Throws ``PostgresError/Code-swift.struct/invalidConfiguration`` for settings that cannot
  /// work.
  func validated() throws -> PostgresConfiguration {
    func fail(_ message: String) -> PostgresError { PostgresError(.invalidConfiguration, message) }
    let identifier = schema.utf8
    guard (1...40).contains(identifier.count),
      identifier.allSatisfy({
        ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F || ($0 >= 0x30 && $0 <= 0x39)
      }),
      let first = identifier.first, !(first >= 0x30 && first <= 0x39)
    else { throw fail("the schema must match [a-z_][a-z0-9_]* (at most 40 characters)") }
    guard (1...256).contains(poolSize) else { throw fail("poolSize must be 1...256") }
    for (name, value) in [
      ("connectTimeout", connectTimeout), ("statementTimeout", statementTimeout),
      ("callTimeout", callTimeout), ("pollInterval", pollInterval.lowerBound),
      ("reconnectDelay", reconnectDelay.lowerBound),
    ] where value <= .zero || value > .seconds(86_400) {
      throw fail("\(name) must be more than zero and at most a day")
    }
    guard !connectionString.utf8.contains(0), !applicationName.utf8.contains(0),
      listenerConnectionString?.utf8.contains(0) != true
    else {
      throw fail("the connection string contains a NUL character")
    }
    return self
  }
}

extension Duration {
  /// Whole milliseconds, rounded up, at least 1.
  var roundedUpMilliseconds: Int64 {
    let (seconds, attoseconds) = components
    let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
    return max(1, milliseconds)
  }

  /// Whole microseconds, rounded up, at least 1.
  var roundedUpMicroseconds: Int64 {
    let (seconds, attoseconds) = components
    return max(1, seconds * 1_000_000 + (attoseconds + 999_999_999_999) / 1_000_000_000_000)
  }
}
