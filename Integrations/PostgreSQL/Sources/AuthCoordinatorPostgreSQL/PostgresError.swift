import TokenStore

/// Why a PostgreSQL store or lease call failed.
///
/// Every error has a stable ``code-swift.property`` to branch on and a message for people. No
/// description ever shows the connection password or a token: messages come from libpq or
/// the server with the configured password replaced by `<redacted>`, and statements are named,
/// never shown with their values.
public struct PostgresError: Error, Hashable, Sendable, CustomStringConvertible {
  /// The kind of failure.
  public struct Code: StableCode {
    public var rawValue: String

    public init(rawValue: String) { self.rawValue = rawValue }

    /// The server could not be reached or refused the connection (authentication included).
    public static let connectionFailed = Code(rawValue: "connection_failed")
    /// The connection broke during a call; whether the call took effect is unknown.
    public static let connectionLost = Code(rawValue: "connection_lost")
    /// The call did not finish within its time limit (``PostgresConfiguration/callTimeout``);
    /// whether it took effect is unknown.
    public static let timedOut = Code(rawValue: "timed_out")
    /// The server refused a statement; ``PostgresError/sqlState`` says why.
    public static let statementFailed = Code(rawValue: "statement_failed")
    /// The server replied with something this package cannot read.
    public static let badReply = Code(rawValue: "bad_reply")
    /// The schema in the database is newer than this package knows.
    public static let unsupportedSchema = Code(rawValue: "unsupported_schema")
    /// A key, account or owner that PostgreSQL cannot store (it contains a NUL character).
    public static let invalidKey = Code(rawValue: "invalid_key")
    /// The configuration cannot work (a bad schema name, pool size or time limit).
    public static let invalidConfiguration = Code(rawValue: "invalid_configuration")
    /// A stored row could not be opened or decoded; it reads as empty.
    public static let corruptRow = Code(rawValue: "corrupt_row")
    /// ``ModelSealing/open(_:for:)`` failed with an error of its own (not
    /// ``corruptRow``): a failure of the moment, such as a key service that is down. The read
    /// fails; the row is left as it is and read again by the next call.
    public static let unsealingFailed = Code(rawValue: "unsealing_failed")
    /// The model could not be encoded or sealed; nothing was written.
    public static let encodingFailed = Code(rawValue: "encoding_failed")
    /// The database was closed (``PostgresDatabase/close()``).
    public static let closed = Code(rawValue: "closed")
  }

  /// The kind of failure.
  public var code: Code
  /// What happened, for people; never a password or a token.
  public var message: String
  /// The server's SQLSTATE for ``Code-swift.struct/statementFailed`` (for example `57014`, a
  /// statement cancelled by `statement_timeout`).
  public var sqlState: String?

  /// Creates an error.
  public init(_ code: Code, _ message: String, sqlState: String? = nil) {
    self.code = code
    self.message = message
    self.sqlState = sqlState
  }

  /// Whether a later call may succeed (the connection or the server's state, not the input).
  public var isTransient: Bool {
    switch code {
    case .connectionFailed, .connectionLost, .timedOut, .unsealingFailed: return true
    case .statementFailed:
      // Class 08 (connection), 40 (serialization, deadlock), 53 (resources), 57 (operator
      // intervention: cancelled, shutting down), 55P03 (lock not available).
      guard let sqlState else { return false }
      return ["08", "40", "53", "57"].contains(String(sqlState.prefix(2))) || sqlState == "55P03"
    default: return false
    }
  }

  public static func == (lhs: PostgresError, rhs: PostgresError) -> Bool {
    lhs.code == rhs.code && lhs.sqlState == rhs.sqlState
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
    hasher.combine(sqlState)
  }

  public var description: String {
    var text = "PostgresError(\(code.rawValue)"
    if let sqlState { text += ", SQLSTATE \(sqlState)" }
    return text + "): \(message)"
  }
}
