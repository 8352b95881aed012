import CLibPQ
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// A parameter of a statement: text (numbers included, with a cast in the SQL) or bytes
/// (sent in binary, for `bytea`).
enum PostgresValue {
  case text(String)
  case bytes(Data)
  case null
}

/// The rows a statement returned, as text (libpq's text format).
struct PostgresRows {
  var rows: [[String?]]

  var first: [String?]? { rows.first }
}

/// One libpq connection, used by one thread only (a pool worker or the listener). Every call
/// uses libpq's non-blocking API and `poll(2)` with a deadline, so a server that stops
/// answering cannot hold the thread past the deadline: the call throws `timedOut` and the
/// owner closes the connection.
final class PostgresConnection {
  private let handle: OpaquePointer
  private let redactor: Redactor
  /// Set when a call failed in a way that leaves the connection unusable.
  private(set) var isBroken = false

  private init(handle: OpaquePointer, redactor: Redactor) {
    self.handle = handle
    self.redactor = redactor
  }

  deinit { PQfinish(handle) }

  /// Opens a connection with the configuration's time limits as session settings.
  static func open(
    _ configuration: PostgresConfiguration, redactor: Redactor, deadline: ContinuousClock.Instant
  ) throws -> PostgresConnection {
    let statementMilliseconds = configuration.statementTimeout.roundedUpMilliseconds
    let connectSeconds = max(2, (configuration.connectTimeout.roundedUpMilliseconds + 999) / 1000)
    // The connection string first, expanded (expand_dbname); the package's settings after it
    // win over the same keywords in the string.
    let settings: [(String, String)] = [
      ("dbname", configuration.connectionString),
      ("connect_timeout", String(connectSeconds)),
      ("application_name", configuration.applicationName),
      (
        "options",
        "-c statement_timeout=\(statementMilliseconds) -c lock_timeout=\(statementMilliseconds)"
          + " -c idle_in_transaction_session_timeout=\(statementMilliseconds * 2)"
          + " -c client_min_messages=warning"
      ),
      ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"),
      ("keepalives_count", "3"),
    ]
    let keywords = settings.map { strdup($0.0) }
    let values = settings.map { strdup($0.1) }
    defer {
      for pointer in keywords + values { free(pointer) }
    }
    let handle: OpaquePointer? = withArrayOfCStrings(keywords) { keywordPointers in
      withArrayOfCStrings(values) { valuePointers in
        PQconnectStartParams(keywordPointers, valuePointers, 1)
      }
    }
    guard let handle else { throw PostgresError(.connectionFailed, "libpq is out of memory") }
    let connection = PostgresConnection(handle: handle, redactor: redactor)
    // libpq prints the server's notices and warnings to stderr by default; a library keeps
    // quiet (its errors reach the caller as PostgresError instead).
    PQsetNoticeProcessor(handle, { _, _ in }, nil)
    guard PQstatus(handle) != CONNECTION_BAD else {
      throw PostgresError(.connectionFailed, connection.lastMessage)
    }
    var status = PGRES_POLLING_WRITING
    while true {
      switch status {
      case PGRES_POLLING_OK:
        guard PQsetnonblocking(handle, 1) == 0 else {
          throw PostgresError(.connectionFailed, connection.lastMessage)
        }
        return connection
      case PGRES_POLLING_READING:
        try connection.wait(forReading: true, forWriting: false, until: deadline, connecting: true)
      case PGRES_POLLING_WRITING:
        try connection.wait(forReading: false, forWriting: true, until: deadline, connecting: true)
      default:
        throw PostgresError(.connectionFailed, connection.lastMessage)
      }
      status = PQconnectPoll(handle)
    }
  }

  /// Runs one statement with parameters and returns its rows (none for a command).
  func execute(
    _ sql: String, _ parameters: [PostgresValue] = [], until deadline: ContinuousClock.Instant
  ) throws -> PostgresRows {
    let buffers: [Data?] = parameters.map {
      switch $0 {
      case .text(let text): return Data(text.utf8) + [0]
      case .bytes(let bytes): return bytes
      case .null: return nil
      }
    }
    let lengths = buffers.map { Int32($0?.count ?? 0) }
    let formats = parameters.map { value -> Int32 in
      if case .bytes = value { return 1 }
      return 0
    }
    let sent: Int32 = withPinnedBuffers(buffers) { pointers in
      PQsendQueryParams(
        handle, sql, Int32(parameters.count), nil, pointers, lengths, formats, 0)
    }
    guard sent == 1 else { throw broken(.connectionLost) }
    do {
      return try collectResults(until: deadline)
    } catch let error as PostgresError where error.code == .timedOut {
      // The reply may still come: the connection is out of step with its calls.
      isBroken = true
      throw error
    }
  }

  /// Runs a script of several statements without parameters (the schema's migrations).
  func executeScript(_ sql: String, until deadline: ContinuousClock.Instant) throws {
    guard PQsendQuery(handle, sql) == 1 else { throw broken(.connectionLost) }
    do {
      _ = try collectResults(until: deadline)
    } catch let error as PostgresError where error.code == .timedOut {
      isBroken = true
      throw error
    }
  }

  /// Waits until a notification arrives or `deadline` passes, and returns the payloads that
  /// arrived (as channel and payload).
  func notifications(until deadline: ContinuousClock.Instant) throws -> [(String, String)] {
    var received = drainNotifications()
    if !received.isEmpty { return received }
    do {
      try wait(forReading: true, forWriting: false, until: deadline, connecting: false)
    } catch let error as PostgresError where error.code == .timedOut {
      return []
    }
    guard PQconsumeInput(handle) == 1 else { throw broken(.connectionLost) }
    received = drainNotifications()
    return received
  }

  private func drainNotifications() -> [(String, String)] {
    var received: [(String, String)] = []
    while let notice = PQnotifies(handle) {
      received.append(
        (String(cString: notice.pointee.relname), String(cString: notice.pointee.extra)))
      PQfreemem(notice)
    }
    return received
  }

  private func collectResults(until deadline: ContinuousClock.Instant) throws -> PostgresRows {
    // Send what libpq buffered.
    while true {
      let flushed = PQflush(handle)
      if flushed == 0 { break }
      guard flushed == 1 else { throw broken(.connectionLost) }
      try wait(forReading: true, forWriting: true, until: deadline, connecting: false)
      guard PQconsumeInput(handle) == 1 else { throw broken(.connectionLost) }
    }
    var rows = PostgresRows(rows: [])
    var failure: PostgresError?
    while true {
      while PQisBusy(handle) == 1 {
        try wait(forReading: true, forWriting: false, until: deadline, connecting: false)
        guard PQconsumeInput(handle) == 1 else { throw broken(.connectionLost) }
      }
      guard let result = PQgetResult(handle) else { break }
      defer { PQclear(result) }
      switch PQresultStatus(result) {
      case PGRES_TUPLES_OK, PGRES_SINGLE_TUPLE:
        rows = Self.rows(of: result)
      case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
        rows = PostgresRows(rows: [])
      default:
        let sqlState = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map {
          String(cString: $0)
        }
        let message = PQresultErrorMessage(result).map { String(cString: $0) } ?? ""
        if failure == nil {
          failure = PostgresError(
            .statementFailed,
            redactor.redact(message.trimmingCharacters(in: .whitespacesAndNewlines)),
            sqlState: sqlState)
        }
      }
    }
    if PQstatus(handle) == CONNECTION_BAD { isBroken = true }
    if let failure { throw failure }
    return rows
  }

  private static func rows(of result: OpaquePointer) -> PostgresRows {
    let rowCount = PQntuples(result)
    let columnCount = PQnfields(result)
    var rows: [[String?]] = []
    rows.reserveCapacity(Int(rowCount))
    for row in 0..<rowCount {
      var values: [String?] = []
      for column in 0..<columnCount {
        if PQgetisnull(result, row, column) == 1 {
          values.append(nil)
        } else {
          values.append(String(cString: PQgetvalue(result, row, column)))
        }
      }
      rows.append(values)
    }
    return PostgresRows(rows: rows)
  }

  /// Whether the server ended the session while the connection sat idle between calls (an
  /// administrator's `pg_terminate_backend`, `idle_session_timeout`, a shutdown or a failover):
  /// the server then sent its reason and closed the socket. When the socket has something to
  /// read, libpq reads it without waiting (`PQconsumeInput`) and parses it (`PQisBusy`): a
  /// closed socket makes the connection bad, and it is marked broken, so that its owner opens
  /// another before the next call instead of failing the call. Anything else the server may
  /// send an idle session (a notice, a parameter's new value, TLS records) is consumed and the
  /// connection kept.
  ///
  /// A few `poll(2)`s that do not wait. A session that ends during a call still fails that
  /// call: whether the statement took effect is unknown, so it is not run again.
  func endedWhileIdle() -> Bool {
    if isBroken { return true }
    let socket = PQsocket(handle)
    guard socket >= 0 else {
      isBroken = true
      return true
    }
    // A goodbye and the close may come in two reads; a session sent more than that while idle
    // is not one to trust either.
    for _ in 0..<8 {
      var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
      let ready = poll(&descriptor, 1, 0)
      if ready == 0 { return false }
      if ready < 0 {
        if errno == EINTR { continue }
        break
      }
      guard PQconsumeInput(handle) == 1, PQstatus(handle) != CONNECTION_BAD else { break }
      // Parses what arrived: an idle session's error or notice goes to the (silent) notice
      // processor, a parameter's value is recorded, and nothing is left for the next call.
      _ = PQisBusy(handle)
    }
    isBroken = true
    return true
  }

  /// Polls the connection's socket until it is ready or `deadline` passes.
  private func wait(
    forReading: Bool, forWriting: Bool, until deadline: ContinuousClock.Instant, connecting: Bool
  ) throws {
    let socket = PQsocket(handle)
    guard socket >= 0 else {
      throw connecting ? PostgresError(.connectionFailed, lastMessage) : broken(.connectionLost)
    }
    var events: Int16 = 0
    if forReading { events |= Int16(POLLIN) }
    if forWriting { events |= Int16(POLLOUT) }
    while true {
      let remaining = ContinuousClock.now.duration(to: deadline)
      guard remaining > .zero else {
        throw PostgresError(
          connecting ? .connectionFailed : .timedOut,
          connecting ? "the connection did not open in time" : "no reply in time")
      }
      var descriptor = pollfd(fd: socket, events: events, revents: 0)
      let milliseconds = Int32(clamping: remaining.roundedUpMilliseconds)
      let ready = poll(&descriptor, 1, milliseconds)
      if ready > 0 { return }
      if ready < 0 && errno != EINTR { throw broken(.connectionLost) }
    }
  }

  private func broken(_ code: PostgresError.Code) -> PostgresError {
    isBroken = true
    return PostgresError(code, lastMessage)
  }

  /// libpq's last message for this connection, password redacted.
  private var lastMessage: String {
    let text = PQerrorMessage(handle).map { String(cString: $0) } ?? ""
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    return trimmed.isEmpty ? "no message from libpq" : redactor.redact(trimmed)
  }
}

/// Calls `body` with a C array of the given C strings.
private func withArrayOfCStrings<R>(
  _ strings: [UnsafeMutablePointer<CChar>?],
  _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R
) -> R {
  let pointers = strings.map { UnsafePointer($0) } + [nil]
  return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// Calls `body` with pointers to each buffer's bytes, valid for the call.
private func withPinnedBuffers<R>(
  _ buffers: [Data?], _ body: ([UnsafePointer<CChar>?]) -> R
) -> R {
  let copies = buffers.map { data -> UnsafeMutablePointer<CChar>? in
    guard let data else { return nil }
    let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, data.count))
    data.withUnsafeBytes { raw in
      if let base = raw.baseAddress {
        UnsafeMutableRawPointer(copy).copyMemory(from: base, byteCount: data.count)
      }
    }
    return copy
  }
  defer {
    for copy in copies { copy?.deallocate() }
  }
  return body(copies.map { $0.map { UnsafePointer($0) } })
}
