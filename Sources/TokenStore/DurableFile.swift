import Foundation
import SyncPrimitives

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// What ``FileTokenStore`` and ``FileAuthorizationLease`` do to their files alike: replace one
/// atomically and durably, take its sidecar lock with a bounded wait, and map `errno` to codes.
///
/// Every call blocks (`fsync`, `flock` polling): run it on the owner's private queue, never on
/// the cooperative pool.
struct DurableFile: Sendable {
  /// The file.
  let path: String
  let directoryPath: String
  let fileName: String
  /// The sidecar lock file, `<path>.lock`.
  let lockPath: String
  /// How messages name the file: "the store", "the lease file".
  let noun: String
  /// Whether the file holds tokens: then group and others may not even read it.
  let holdsSecrets: Bool
  /// What an untrusted owner or mode leads to (``OwnershipPolicy/platformDefault``).
  let ownershipPolicy: OwnershipPolicy
  /// Where ``OwnershipPolicy/report`` reports.
  let onIssue: (@Sendable (TokenStoreError) -> Void)?
  /// The ownership problems already reported (path and message), so each is reported once.
  let reportedOwnership = LockedState<Set<String>>([])

  init(
    url: URL, noun: String, holdsSecrets: Bool = false,
    ownershipPolicy: OwnershipPolicy = .platformDefault,
    onIssue: (@Sendable (TokenStoreError) -> Void)? = nil
  ) {
    path = url.path(percentEncoded: false)
    let directory = url.deletingLastPathComponent().path(percentEncoded: false)
    directoryPath = directory.isEmpty ? "." : directory
    fileName = url.lastPathComponent
    lockPath = path + ".lock"
    self.noun = noun
    self.holdsSecrets = holdsSecrets
    self.ownershipPolicy = ownershipPolicy
    self.onIssue = onIssue
  }

  // MARK: - Atomic replace

  /// Writes a temporary file (mode exactly `0600`) next to the file, syncs it, renames it over
  /// the file and syncs the directory (a failure of that last sync goes to `onIssue`: the
  /// rename has happened). A reader, or a crash at any instant, sees the old file or the new.
  func replace(
    with data: Data, onIssue: (TokenStoreError) -> Void
  ) throws(TokenStoreError) {
    let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let temporaryPath = "\(directoryPath)/\(fileName).tmp-\(getpid())-\(suffix)"
    let fd = open(
      temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    guard fd >= 0 else {
      throw Self.systemError(
        "open", errno, "A temporary file cannot be created next to \(noun).",
        path: temporaryPath)
    }
    var renamed = false
    var isOpen = true
    defer {
      if isOpen { close(fd) }
      if !renamed { unlink(temporaryPath) }
    }
    // The umask may have removed bits but never adds any; make it exactly 0600.
    guard fchmod(fd, mode_t(0o600)) == 0 else {
      throw Self.systemError(
        "fchmod", errno, "The temporary file's mode cannot be set.", path: temporaryPath)
    }
    let writeError = data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Int32? in
      var offset = 0
      while offset < bytes.count {
        let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 {
          if errno == EINTR { continue }
          return errno
        }
        offset += written
      }
      return nil
    }
    if let writeError {
      throw Self.systemError(
        "write", writeError, "The temporary file cannot be written.", path: temporaryPath)
    }
    guard Self.fullSync(fd) == 0 else {
      throw Self.systemError(
        "fsync", errno, "The temporary file cannot be synced.", path: temporaryPath)
    }
    isOpen = false
    guard close(fd) == 0 else {
      throw Self.systemError(
        "close", errno, "The temporary file cannot be closed.", path: temporaryPath)
    }
    guard rename(temporaryPath, path) == 0 else {
      throw Self.systemError("rename", errno, "The new file cannot replace \(noun).", path: path)
    }
    renamed = true
    syncDirectory(onIssue: onIssue)
  }

  /// Syncs the directory, so that a rename in it survives a power loss.
  func syncDirectory(onIssue: (TokenStoreError) -> Void) {
    let fd = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else {
      onIssue(
        Self.systemError(
          "open", errno, "The directory of \(noun) cannot be synced.", path: directoryPath))
      return
    }
    defer { close(fd) }
    if fsync(fd) != 0 {
      onIssue(
        Self.systemError(
          "fsync", errno, "The directory of \(noun) cannot be synced.", path: directoryPath))
    }
  }

  static func fullSync(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
      // fsync on Apple platforms does not flush the drive's cache; F_FULLFSYNC does.
      if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
    #endif
    return fsync(fd)
  }

  /// Deletes temporary files a writer killed between creating and renaming left behind. Call
  /// it holding the lock: no cooperating writer has one in progress then, so all are stale.
  func removeStaleTemporaryFiles() {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directoryPath)
    else { return }
    let prefix = "\(fileName).tmp-"
    for name in names where name.hasPrefix(prefix) {
      unlink("\(directoryPath)/\(name)")
    }
  }

  /// Creates the directory (mode `0700`) with its missing parents.
  func createDirectory() throws(TokenStoreError) {
    do {
      try FileManager.default.createDirectory(
        atPath: directoryPath, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    } catch {
      throw TokenStoreError(
        .ioFailure, "The directory of \(noun) cannot be created.", path: directoryPath)
    }
  }

  // MARK: - Reading

  /// What ``read(maximumSize:)`` found.
  enum Contents {
    case missing
    case data(Data, FileIdentity)
    /// Larger than the cap: not read (or not read further).
    case tooLarge(FileIdentity)
  }

  /// Reads the whole file, without following a symbolic link and without ever holding more
  /// than `maximumSize` bytes (the file may grow while it is read). The file is opened
  /// relative to its directory's descriptor once the directory passed its owner and mode
  /// checks, and checked itself through its own descriptor (`fstat`).
  ///
  /// - Throws: ``TokenStoreError/Code/notARegularFile`` for a link, a directory or a FIFO;
  ///   ``TokenStoreError/Code/insecurePermissions`` for a directory or file another user owns
  ///   or group or others may write (a file holding tokens: read);
  ///   the code of `errno` when it cannot be opened, examined or read.
  func read(maximumSize: Int) throws(TokenStoreError) -> Contents {
    guard let directory = try openCheckedDirectory() else { return .missing }
    defer { close(directory) }
    let fd = openat(directory, fileName, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    if fd < 0 {
      let code = errno
      if code == ENOENT { return .missing }
      if code == ELOOP {
        throw TokenStoreError(
          .notARegularFile, "The path of \(noun) is a symbolic link; it is never followed.",
          path: path, underlying: POSIXErrorDescription(call: "open", errno: code))
      }
      throw Self.systemError("open", code, "\(capitalizedNoun) cannot be opened.", path: path)
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      throw Self.systemError(
        "fstat", errno, "\(capitalizedNoun) cannot be examined.", path: path)
    }
    let identity = FileIdentity(info)
    guard identity.isRegularFile else {
      throw TokenStoreError(
        .notARegularFile, "The path of \(noun) is not a regular file.", path: path)
    }
    try check(info, as: .file, path: path, fd: fd)
    guard identity.size <= Int64(maximumSize) else { return .tooLarge(identity) }
    var data = Data()
    data.reserveCapacity(Int(identity.size))
    let chunkSize = 64 * 1024
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 1)
    defer { buffer.deallocate() }
    while true {
      let count = systemRead(fd, buffer.baseAddress, chunkSize)
      if count < 0 {
        if errno == EINTR { continue }
        throw Self.systemError("read", errno, "\(capitalizedNoun) cannot be read.", path: path)
      }
      if count == 0 { break }
      data.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
      if data.count > maximumSize { return .tooLarge(identity) }
    }
    return .data(data, identity)
  }

  /// `read(2)` (the method above shadows its name).
  private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    #if canImport(Darwin)
      Darwin.read(fd, buffer, count)
    #elseif canImport(Glibc)
      Glibc.read(fd, buffer, count)
    #else
      Musl.read(fd, buffer, count)
    #endif
  }

  var capitalizedNoun: String { noun.prefix(1).uppercased() + noun.dropFirst() }

  // MARK: - The sidecar lock

  /// Opens `<path>.lock` (never through a symbolic link), creating it with mode 0600, once
  /// its directory passed its checks; then checks the lock file itself.
  ///
  /// - Returns: The descriptor, or -1 (with `errno` set) when it cannot be opened.
  /// - Throws: ``TokenStoreError/Code/insecurePermissions`` (the directory or the lock file),
  ///   or the code of a directory that cannot be opened or examined.
  func openCheckedLockFile() throws(TokenStoreError) -> Int32 {
    guard let directory = try openCheckedDirectory() else {
      errno = ENOENT
      return -1
    }
    defer { close(directory) }
    let lockName = fileName + ".lock"
    let fd = openat(directory, lockName, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    guard fd >= 0 else { return -1 }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      let code = errno
      close(fd)
      throw Self.systemError(
        "fstat", code, "The lock file of \(noun) cannot be examined.", path: lockPath)
    }
    do throws(TokenStoreError) {
      try check(info, as: .lockFile, path: lockPath, fd: fd)
    } catch {
      close(fd)
      throw error
    }
    return fd
  }

  /// ``openCheckedLockFile()``, -1 for any failure (for callers that go on without the lock).
  func openLockFile() -> Int32 {
    (try? openCheckedLockFile()) ?? -1
  }

  enum LockOutcome: Equatable {
    case acquired
    /// Held elsewhere for the whole timeout.
    case timedOut
    /// `flock` failed for another reason (the `errno`).
    case failed(Int32)
  }

  /// Takes an exclusive `flock` on the descriptor, waiting at most `timeout`.
  ///
  /// A blocking `flock(LOCK_EX)` would wait forever for a holder that never lets go (a hung
  /// process, a descriptor leaked in this one), and with it every call queued behind it. So it
  /// polls with `LOCK_NB`, sleeping between attempts, 1 ms at first and doubling up to 50 ms.
  static func acquireLock(_ fd: Int32, timeout: Duration) -> LockOutcome {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: timeout)
    var pause = Duration.milliseconds(1)
    while true {
      if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .acquired }
      let code = errno
      if code == EINTR { continue }
      guard code == EWOULDBLOCK || code == EAGAIN else { return .failed(code) }
      let now = clock.now
      guard now < deadline else { return .timedOut }
      sleep(min(pause, now.duration(to: deadline)))
      pause = min(pause * 2, .milliseconds(50))
    }
  }

  /// Runs `body` holding an exclusive `flock` on `<path>.lock`, creating the directory and the
  /// lock file (mode 0600) when missing; the lock is released when `body` returns.
  func withExclusiveLock<T>(
    timeout: Duration, _ body: () throws(TokenStoreError) -> T
  ) throws(TokenStoreError) -> T {
    var fd = try openCheckedLockFile()
    if fd < 0 && errno == ENOENT {
      try createDirectory()
      fd = try openCheckedLockFile()
    }
    guard fd >= 0 else {
      let code = errno
      if code == ELOOP {
        throw TokenStoreError(
          .notARegularFile, "The lock file of \(noun) is a symbolic link; it is never followed.",
          path: lockPath)
      }
      throw Self.systemError(
        "open", code, "The lock file of \(noun) cannot be opened.", path: lockPath)
    }
    defer { close(fd) }  // Closing the descriptor releases the lock.
    switch Self.acquireLock(fd, timeout: timeout) {
    case .acquired:
      return try body()
    case .timedOut:
      throw TokenStoreError(
        .lockTimeout,
        "The lock file of \(noun) stayed locked by another process or open file for the"
          + " \(timeout) lock timeout; nothing was changed.",
        path: lockPath)
    case .failed(let code):
      throw Self.systemError("flock", code, "The lock of \(noun) cannot be taken.", path: lockPath)
    }
  }

  /// Blocks the calling thread (the owner's queue) for `duration`.
  static func sleep(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR {
      request = remaining
    }
  }

  // MARK: - Errors

  /// A POSIX failure as a ``TokenStoreError``, its code chosen by `errno`.
  static func systemError(
    _ call: String, _ code: Int32, _ message: String, path: String
  ) -> TokenStoreError {
    let kind: TokenStoreError.Code =
      switch code {
      case EACCES, EPERM, EROFS: .permissionDenied
      case EISDIR, ELOOP, ENXIO: .notARegularFile
      default: .ioFailure
      }
    return TokenStoreError(
      kind, message, path: path, underlying: POSIXErrorDescription(call: call, errno: code))
  }
}
