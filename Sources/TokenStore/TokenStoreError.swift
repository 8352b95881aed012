/// An error from a ``FileTokenStore`` (or from decoding its file format), with a stable code.
///
/// Switch on ``code`` rather than on the message: codes are stable, new codes can be added
/// without breaking callers, and two errors compare equal when their codes are equal.
///
/// ```swift
/// do {
///   try await store.validate()
/// } catch where error.code == .unsupportedVersion {
///   // A newer app version wrote this file; leave it alone.
/// }
/// ```
///
/// Messages name the file and what is wrong with it; they never contain an access token or any
/// other stored value.
public struct TokenStoreError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong, as a stable, string-backed value.
  public struct Code: StableCode {
    /// The code's stable name.
    public var rawValue: String

    /// Creates a code from its name.
    ///
    /// - Parameter rawValue: The code's stable name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The file is not in the store's format: bad header, bad checksum, unparsable entries.
    public static let corruptFile = Code(rawValue: "corrupt_file")
    /// The file ends before the length its header announces (or is empty).
    public static let truncatedFile = Code(rawValue: "truncated_file")
    /// The file was written by a newer format version; it is left untouched.
    public static let unsupportedVersion = Code(rawValue: "unsupported_version")
    /// The file is larger than the store's size cap; it was not read. Also thrown by a change
    /// that would write a file over the cap: it is refused and the previous file kept.
    public static let fileTooLarge = Code(rawValue: "file_too_large")
    /// The path is a symbolic link, a directory, a FIFO or anything else but a regular file.
    public static let notARegularFile = Code(rawValue: "not_a_regular_file")
    /// The operating system refused access to the file, its lock file or its directory.
    public static let permissionDenied = Code(rawValue: "permission_denied")
    /// Any other failing system call (disk full, I/O error, ...).
    public static let ioFailure = Code(rawValue: "io_failure")
    /// The models could not be encoded.
    public static let encodingFailed = Code(rawValue: "encoding_failed")
    /// The store's lock file stayed locked (by another process, or another open file
    /// description in this one) for longer than the store's lock timeout; nothing was changed.
    public static let lockTimeout = Code(rawValue: "lock_timeout")
    /// The file, its lock file or its directory is owned by another user, or group or others
    /// may write it (the store's file: read it either): another local user could have planted
    /// what it holds, so it is not used. Thrown on Linux, macOS and other platforms; on iOS,
    /// tvOS, watchOS and visionOS (the sandbox keeps apps apart; app group containers' modes
    /// are the system's) it is reported to `onIssue` instead. See Sources/TokenStore/Documentation.docc/TokenStores.md.
    public static let insecurePermissions = Code(rawValue: "insecure_permissions")
  }

  /// What went wrong.
  public var code: Code
  /// A human-readable explanation. Never contains a token.
  public var message: String
  /// The file concerned, when there is one.
  public var path: String?
  /// The error that caused this one (for example a ``POSIXErrorDescription``), if any.
  public var underlying: (any Error & Sendable)?

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - code: What went wrong.
  ///   - message: A human-readable explanation; must not contain a token.
  ///   - path: The file concerned, if any.
  ///   - underlying: The error that caused this one, if any.
  public init(
    _ code: Code,
    _ message: String,
    path: String? = nil,
    underlying: (any Error & Sendable)? = nil
  ) {
    self.code = code
    self.message = message
    self.path = path
    self.underlying = underlying
  }

  /// Whether two errors have the same ``code``.
  ///
  /// - Parameters:
  ///   - lhs: An error.
  ///   - rhs: Another error.
  /// - Returns: `true` when the codes are equal; messages, paths and underlying errors are
  ///   ignored.
  public static func == (lhs: TokenStoreError, rhs: TokenStoreError) -> Bool {
    lhs.code == rhs.code
  }

  /// Hashes the ``code`` only, consistent with `==`.
  ///
  /// - Parameter hasher: The hasher to feed.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(code)
  }

  /// `TokenStoreError(code): message (path: ...)`.
  public var description: String {
    var text = "TokenStoreError(\(code.rawValue)): \(message)"
    if let path { text += " (path: \(path))" }
    if let underlying { text += " [underlying: \(underlying)]" }
    return text
  }
}

/// A failed system call, kept as the ``TokenStoreError/underlying`` error.
///
/// Only the call's name and `errno` are kept: never a path's content.
public struct POSIXErrorDescription: Error, Hashable, Sendable, CustomStringConvertible {
  /// The system call that failed, for example `"open"`.
  public var call: String
  /// The `errno` value it set.
  public var errno: Int32

  /// Creates a description of a failed call.
  ///
  /// - Parameters:
  ///   - call: The system call's name.
  ///   - errno: The `errno` value it set.
  public init(call: String, errno: Int32) {
    self.call = call
    self.errno = errno
  }

  /// `open: errno 13`.
  public var description: String { "\(call): errno \(errno)" }
}
