import Dispatch
import Foundation
import SyncPrimitives

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A ``TokenStore`` that keeps every key of one store in one file, safe against crashes,
/// garbage, downgrades and concurrent writers in other processes.
///
/// ```swift
/// let store = FileTokenStore(
///   url: appSupport.appending(path: "auth/tokens.store"),
///   onIssue: { issue in logger.warning("token store: \(issue)") }  // never contains a token
/// )
/// try await store.save(model, for: AccountKey(mcUid: "u1"))
/// let again = try await store.model(for: AccountKey(mcUid: "u1"))
/// ```
///
/// Guarantees (see `docs/token-store.md` for the file format):
/// - **Atomic replace.** Every change writes a new file next to the old one (mode `0600`,
///   created with `open(2)`, not with the process umask's default), `fsync`s it, `rename`s it
///   over the store and `fsync`s the directory. A reader, or a crash at any instant, sees the
///   old file or the new one, never a mixture. A failed save leaves the previous file intact.
/// - **Cross-process safety.** A read-modify-write holds an advisory `flock` on the sidecar
///   file `<name>.lock` and re-reads the store under it, so two processes (an app and its
///   extension) never lose each other's updates. The decoded contents are cached in memory
///   and re-read whenever the file's identity (device, inode, size, modification time)
///   changes, so another process's writes are seen by the next read.
/// - **Bounded lock wait.** The lock is waited for at most ``lockTimeout`` (5 seconds by
///   default); after that a change throws ``TokenStoreError/Code/lockTimeout`` and leaves the
///   file as it was. Reading a good file needs no lock at all. One store runs its operations
///   one at a time, so a call waiting for the lock delays the calls queued behind it, for every
///   key, by at most that long each.
/// - **Corrupt, truncated or oversized files** (``TokenStoreError/Code/corruptFile``,
///   ``TokenStoreError/Code/truncatedFile``, ``TokenStoreError/Code/fileTooLarge``) are
///   reported to `onIssue`, renamed to `<name>.corrupt-<UTC timestamp>` for diagnosis (an
///   oversized file is never read into memory) and treated as empty; the next save writes a
///   fresh file.
/// - **Quarantined copies are bounded and deleted on removal.** Such a copy may hold live
///   tokens, and it cannot be safely edited, so at most ``maximumQuarantinedFiles`` (3 by
///   default) are kept, the oldest deleted first, and ``removeModel(for:)``,
///   ``removeModels(forMcUid:)`` and ``removeAll()`` delete all of them: after a logout no
///   token of the user is left on disk, not even in a copy kept for diagnosis.
/// - **Newer versions** (``TokenStoreError/Code/unsupportedVersion``): the file is reported
///   and read as empty but never replaced; every change throws instead, so running an older
///   app does not destroy what a newer one stored.
/// - **Not a regular file** (a symbolic link, directory, FIFO:
///   ``TokenStoreError/Code/notARegularFile``) or **unreadable**
///   (``TokenStoreError/Code/permissionDenied``): every operation throws; the store never
///   follows a link at the final path component and never writes there.
///
/// Reading a bad file does not throw from ``model(for:)``: the issue goes to `onIssue`. Use
/// ``validate()`` or ``loadAll()`` to surface it in tools and tests.
///
/// Operations are not cancellable once started: a cancelled task still waits for its write to
/// finish (or fail), so no half-done change is ever left behind.
///
/// > Important: The enclosing directory is created (mode `0700`) when missing. Symbolic links
/// > in the directory part of the path are followed; only the final component is checked.
public final class FileTokenStore: TokenStore {
  // Why a final class and not an actor: every operation is a sequence of blocking system calls
  // (fsync, and flock, which can wait for another process). On an actor they would run on, and
  // block, a thread of the cooperative pool (two threads on a two-core machine). Instead each
  // store owns a serial DispatchQueue that performs the operations one at a time, and the async
  // methods suspend on a continuation until their operation is done. The cache lives in a
  // `LockedState`; the queue already serialises access, the lock makes that checkable.

  /// The default size cap: 16 MiB.
  public static let defaultMaximumFileSize = 16 * 1024 * 1024

  /// The default ``lockTimeout``: 5 seconds.
  public static let defaultLockTimeout: Duration = .seconds(5)

  /// The default ``maximumQuarantinedFiles``: 3.
  public static let defaultMaximumQuarantinedFiles = 3

  /// The store's file.
  public let url: URL
  /// Files larger than this many bytes are not read, and a change that would write one is
  /// refused (``TokenStoreError/Code/fileTooLarge`` in both cases).
  public let maximumFileSize: Int
  /// How long a change waits for the cross-process lock on `<name>.lock` before it throws
  /// ``TokenStoreError/Code/lockTimeout``. Zero means a single attempt.
  public let lockTimeout: Duration
  /// How many moved-aside copies of bad files (`<name>.corrupt-*`) are kept for diagnosis; the
  /// oldest are deleted beyond this. Zero deletes a bad file instead of keeping it.
  public let maximumQuarantinedFiles: Int

  private let path: String
  private let directoryPath: String
  private let fileName: String
  private let lockPath: String
  private let onIssue: (@Sendable (TokenStoreError) -> Void)?
  private let queue: DispatchQueue
  private let state = LockedState(State())

  private struct State {
    var cache: Snapshot?
    var removedStaleTemporaryFiles = false
  }

  /// What the store believes the file holds.
  private struct Snapshot {
    /// The file the models were read from (`nil`: there was no file).
    var identity: FileIdentity?
    var models: [AccountKey: AuthModel]
    /// Set when the file must not be replaced (a newer version wrote it).
    var writeBlocker: TokenStoreError?
  }

  /// Creates a store backed by the file at `url`. Nothing is read until the first call.
  ///
  /// - Parameters:
  ///   - url: A file URL. Its directory is created on the first save when missing.
  ///   - maximumFileSize: Files larger than this are moved aside unread, and a save that would
  ///     write one throws instead; 16 MiB by default.
  ///   - lockTimeout: How long a change waits for the lock that another process (or another
  ///     open file description) holds before it throws ``TokenStoreError/Code/lockTimeout``;
  ///     ``defaultLockTimeout`` (5 seconds) by default. Negative values count as zero.
  ///   - maximumQuarantinedFiles: How many moved-aside copies of bad files to keep, newest
  ///     first; ``defaultMaximumQuarantinedFiles`` (3) by default. Negative values count as
  ///     zero. Every removal deletes them all regardless.
  ///   - onIssue: Called (on the store's private queue) with every problem the store handles
  ///     itself instead of throwing: a corrupt, truncated or oversized file moved aside, a
  ///     newer-version file read as empty, a directory that could not be synced. Errors that
  ///     are thrown are not also reported here.
  public init(
    url: URL,
    maximumFileSize: Int = FileTokenStore.defaultMaximumFileSize,
    lockTimeout: Duration = FileTokenStore.defaultLockTimeout,
    maximumQuarantinedFiles: Int = FileTokenStore.defaultMaximumQuarantinedFiles,
    onIssue: (@Sendable (TokenStoreError) -> Void)? = nil
  ) {
    self.url = url
    self.maximumFileSize = max(0, maximumFileSize)
    self.lockTimeout = max(.zero, lockTimeout)
    self.maximumQuarantinedFiles = max(0, maximumQuarantinedFiles)
    path = url.path(percentEncoded: false)
    let directory = url.deletingLastPathComponent().path(percentEncoded: false)
    directoryPath = directory.isEmpty ? "." : directory
    fileName = url.lastPathComponent
    lockPath = path + ".lock"
    self.onIssue = onIssue
    queue = DispatchQueue(label: "AuthCoordinator.FileTokenStore", qos: .utility)
  }

  // MARK: - TokenStore

  /// Reads the model stored for `key`.
  ///
  /// Served from memory while the file is unchanged. A corrupt, truncated, oversized or
  /// newer-version file reads as empty (and is reported to `onIssue`). Reading a good file
  /// takes no lock; moving a bad one aside does, and when the lock stays held elsewhere for
  /// ``lockTimeout`` the bad file is reported and left in place instead.
  ///
  /// - Parameter key: The account.
  /// - Returns: The stored model, or `nil`.
  /// - Throws: ``TokenStoreError`` with ``TokenStoreError/Code/notARegularFile``,
  ///   ``TokenStoreError/Code/permissionDenied`` or ``TokenStoreError/Code/ioFailure`` when the
  ///   file cannot be read at all.
  public func model(for key: AccountKey) async throws(TokenStoreError) -> AuthModel? {
    try await perform { store throws(TokenStoreError) in try store.currentSnapshot().models[key] }
  }

  /// Stores `model` for `key`, keeping every other key's model.
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  /// - Throws: ``TokenStoreError``: ``TokenStoreError/Code/unsupportedVersion`` when a newer
  ///   version wrote the file (it is left as it is), ``TokenStoreError/Code/lockTimeout`` when
  ///   the lock stayed held elsewhere for ``lockTimeout``,
  ///   ``TokenStoreError/Code/notARegularFile``, ``TokenStoreError/Code/permissionDenied``,
  ///   ``TokenStoreError/Code/ioFailure``, ``TokenStoreError/Code/encodingFailed``,
  ///   ``TokenStoreError/Code/fileTooLarge`` when the new file would exceed
  ///   ``maximumFileSize`` (a read would reject it). The previous file is intact after a
  ///   failure.
  public func save(_ model: AuthModel, for key: AccountKey) async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify { $0[key] = model }
    }
  }

  /// Removes the model stored for `key`, and every quarantined copy of a bad file (which may
  /// hold it); does nothing else when there is none.
  ///
  /// - Parameter key: The account.
  /// - Throws: ``TokenStoreError``, as ``save(_:for:)`` does, or when a quarantined copy
  ///   cannot be deleted.
  public func removeModel(for key: AccountKey) async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { $0[key] = nil }
    }
  }

  /// Removes every model of the user `mcUid`, in every mode, in one atomic replace, and
  /// deletes every quarantined copy of a bad file (which may hold them).
  ///
  /// - Parameter mcUid: The host app's user id.
  /// - Throws: ``TokenStoreError``, as ``removeModel(for:)`` does.
  public func removeModels(forMcUid mcUid: String) async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { entries in
        for key in entries.keys where key.mcUid == mcUid { entries[key] = nil }
      }
    }
  }

  /// Removes every model (the file then holds no entries) and deletes every quarantined copy
  /// of a bad file.
  ///
  /// - Throws: ``TokenStoreError``, as ``removeModel(for:)`` does; in particular a
  ///   newer-version file is not emptied (its quarantined copies are still deleted).
  public func removeAll() async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { $0.removeAll() }
    }
  }

  // MARK: - Tooling

  /// Returns every stored model, surfacing what ``model(for:)`` only reports.
  ///
  /// Handles the file as a read does (a bad file is moved aside), but throws the issue.
  ///
  /// - Returns: All stored models by key.
  /// - Throws: ``TokenStoreError``: the code of a bad file found (and moved aside) by this call,
  ///   ``TokenStoreError/Code/unsupportedVersion`` while a newer-version file is in place, or
  ///   any error ``model(for:)`` throws.
  public func loadAll() async throws(TokenStoreError) -> [AccountKey: AuthModel] {
    try await perform { store throws(TokenStoreError) in
      var issue: TokenStoreError?
      let snapshot = try store.currentSnapshot(issue: &issue)
      if let issue { throw issue }
      if let blocker = snapshot.writeBlocker { throw blocker }
      return snapshot.models
    }
  }

  /// Checks the file on disk without changing anything: no move, no cache update.
  ///
  /// A missing file is valid (an empty store).
  ///
  /// - Throws: ``TokenStoreError`` with the code of whatever is wrong with the file.
  public func validate() async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      switch try store.readDisk() {
      case .missing, .good: return
      case .bad(_, let error), .newer(_, let error): throw error
      }
    }
  }

  // MARK: - Running operations off the cooperative pool

  private func perform<T: Sendable>(
    _ body: @escaping @Sendable (FileTokenStore) throws(TokenStoreError) -> T
  ) async throws(TokenStoreError) -> T {
    let result: Result<T, TokenStoreError> = await withCheckedContinuation { continuation in
      queue.async {
        continuation.resume(returning: Result { () throws(TokenStoreError) -> T in try body(self) })
      }
    }
    return try result.get()
  }

  // MARK: - Reading (on the queue)

  private func currentSnapshot() throws(TokenStoreError) -> Snapshot {
    var issue: TokenStoreError?
    return try currentSnapshot(issue: &issue)
  }

  /// The cached snapshot if the file is unchanged, else a fresh load.
  ///
  /// A good, missing or newer-version file is read without the lock: every writer replaces the
  /// file with one `rename`, so an unlocked read sees a whole file, old or new. Only a bad file
  /// needs the lock, to be moved aside; it is re-read under the lock first. When the lock
  /// cannot be had (a read-only or missing directory, or held elsewhere for ``lockTimeout``)
  /// the bad file is reported and left in place, and the store reads as empty.
  private func currentSnapshot(issue: inout TokenStoreError?) throws(TokenStoreError) -> Snapshot {
    let identity = try currentIdentity()
    if let cached = state.withLock({ $0.cache }), cached.identity == identity {
      return cached
    }
    var disk = try readDisk()
    var moveAside = false
    var fd: Int32 = -1
    defer { if fd >= 0 { close(fd) } }  // Closing the descriptor releases the lock.
    if case .bad = disk {
      fd = openLockFile()
      if fd >= 0, acquireLock(fd) == .acquired {
        // Another process may have moved or replaced the file while we waited.
        disk = try readDisk()
        moveAside = true
      }
    }
    let result = try absorb(disk, moveAside: moveAside, issue: &issue)
    state.withLock { $0.cache = result }
    return result
  }

  /// Reads the file and turns every absorbed problem into a snapshot plus a report.
  private func load(
    moveAside: Bool,
    forWriting: Bool = false,
    issue: inout TokenStoreError?
  ) throws(TokenStoreError) -> Snapshot {
    try absorb(try readDisk(), moveAside: moveAside, forWriting: forWriting, issue: &issue)
  }

  /// Turns what was read into a snapshot, moving a bad file aside when `moveAside` (the lock
  /// is held) and reporting every absorbed problem.
  private func absorb(
    _ disk: DiskState,
    moveAside: Bool,
    forWriting: Bool = false,
    issue: inout TokenStoreError?
  ) throws(TokenStoreError) -> Snapshot {
    switch disk {
    case .missing:
      return Snapshot(identity: nil, models: [:])
    case .good(let identity, let models):
      return Snapshot(identity: identity, models: models)
    case .newer(let identity, let error):
      issue = error
      report(error)
      return Snapshot(identity: identity, models: [:], writeBlocker: error)
    case .bad(let identity, var problem):
      guard moveAside else {
        problem.message +=
          " It was left in place (moving it needs the store's lock, which could not be taken);"
          + " the store reads as empty."
        issue = problem
        report(problem)
        return Snapshot(identity: identity, models: [:])
      }
      let aside: String
      do throws(TokenStoreError) {
        aside = try moveAsideBadFile()
      } catch {
        // A write must not replace a file it could not keep for diagnosis: fail it. A read
        // reports the file and carries on as if the store were empty.
        if forWriting { throw error }
        problem.message += " It could not be moved aside (\(error.code)); the store reads as empty."
        issue = problem
        report(problem)
        return Snapshot(identity: identity, models: [:])
      }
      if maximumQuarantinedFiles == 0 {
        problem.message +=
          " It was deleted (no quarantined copies are kept) and the store starts empty."
      } else {
        problem.message += " It was moved to \(aside) and the store starts empty."
      }
      do throws(TokenStoreError) {
        try deleteQuarantinedFiles(keepingNewest: maximumQuarantinedFiles)
      } catch {
        report(error)
      }
      issue = problem
      report(problem)
      return Snapshot(identity: nil, models: [:])
    }
  }

  private enum DiskState {
    case missing
    case good(FileIdentity, [AccountKey: AuthModel])
    /// Corrupt, truncated or too large: to be moved aside.
    case bad(FileIdentity, TokenStoreError)
    /// Written by a newer version: to be left alone.
    case newer(FileIdentity, TokenStoreError)
  }

  /// Reads and decodes the file. Throws only when it cannot be read at all.
  private func readDisk() throws(TokenStoreError) -> DiskState {
    let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)
    if fd < 0 {
      let code = errno
      if code == ENOENT { return .missing }
      if code == ELOOP {
        throw TokenStoreError(
          .notARegularFile, "The store path is a symbolic link; it is never followed.",
          path: path, underlying: POSIXErrorDescription(call: "open", errno: code))
      }
      throw systemError("open", code, "The store file cannot be opened.", path: path)
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
      throw systemError("fstat", errno, "The store file cannot be examined.", path: path)
    }
    let identity = FileIdentity(info)
    guard identity.isRegularFile else {
      throw TokenStoreError(
        .notARegularFile, "The store path is not a regular file.", path: path)
    }
    let tooLarge = TokenStoreError(
      .fileTooLarge,
      "The store file is larger than the \(maximumFileSize)-byte limit and was not read.",
      path: path)
    guard identity.size <= Int64(maximumFileSize) else { return .bad(identity, tooLarge) }

    var data = Data()
    data.reserveCapacity(Int(identity.size))
    let chunkSize = 64 * 1024
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunkSize, alignment: 1)
    defer { buffer.deallocate() }
    while true {
      let count = read(fd, buffer.baseAddress, chunkSize)
      if count < 0 {
        if errno == EINTR { continue }
        throw systemError("read", errno, "The store file cannot be read.", path: path)
      }
      if count == 0 { break }
      data.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
      // The file may have grown since fstat: never hold more than the cap.
      if data.count > maximumFileSize { return .bad(identity, tooLarge) }
    }
    do throws(TokenStoreError) {
      return .good(identity, try StoreFileFormat.decode(data))
    } catch {
      var error = error
      error.path = path
      return error.code == .unsupportedVersion ? .newer(identity, error) : .bad(identity, error)
    }
  }

  /// The identity of what is at the path now (`nil`: nothing).
  private func currentIdentity() throws(TokenStoreError) -> FileIdentity? {
    var info = stat()
    guard lstat(path, &info) == 0 else {
      let code = errno
      if code == ENOENT { return nil }
      throw systemError("lstat", code, "The store file cannot be examined.", path: path)
    }
    let identity = FileIdentity(info)
    guard identity.isRegularFile else {
      throw TokenStoreError(
        .notARegularFile,
        identity.isSymbolicLink
          ? "The store path is a symbolic link; it is never followed."
          : "The store path is not a regular file.",
        path: path)
    }
    return identity
  }

  // MARK: - Writing (on the queue)

  /// Read-modify-write under the file lock, re-reading the file first.
  ///
  /// - Parameter deletingQuarantinedFiles: Whether to delete every `.corrupt-*` copy too (a
  ///   removal: the copies may hold the tokens being removed, and cannot be edited).
  private func modify(
    deletingQuarantinedFiles: Bool = false,
    _ change: (inout [AccountKey: AuthModel]) -> Void
  ) throws(TokenStoreError) {
    do throws(TokenStoreError) {
      try withFileLock { () throws(TokenStoreError) in
        removeStaleTemporaryFilesOnce()
        // Re-read under the lock: another process may have written since our last read.
        var issue: TokenStoreError?
        let current = try load(moveAside: true, forWriting: true, issue: &issue)
        state.withLock { $0.cache = current }
        // Before anything can fail or return early: the copies may hold the removed tokens
        // even when the current file holds none.
        if deletingQuarantinedFiles { try deleteQuarantinedFiles(keepingNewest: 0) }
        if let blocker = current.writeBlocker { throw blocker }
        var models = current.models
        change(&models)
        guard models != current.models else { return }
        let data = try StoreFileFormat.encode(models)
        // Never write what a read would reject: an oversized file would be moved aside whole
        // by the next read, and every other key with it.
        guard data.count <= maximumFileSize else {
          throw TokenStoreError(
            .fileTooLarge,
            "The change would make the store file \(data.count) bytes, over the"
              + " \(maximumFileSize)-byte limit; it was refused and the file left as it was.",
            path: path)
        }
        let identity = try replaceFile(with: data)
        state.withLock { $0.cache = Snapshot(identity: identity, models: models) }
      }
    } catch {
      if error.code != .unsupportedVersion {
        state.withLock { $0.cache = nil }
      }
      var error = error
      if error.path == nil { error.path = path }
      throw error
    }
  }

  /// Writes a temporary file, syncs it, renames it over the store and syncs the directory.
  ///
  /// - Returns: The new file's identity (`nil` if it could not be read back).
  private func replaceFile(with data: Data) throws(TokenStoreError) -> FileIdentity? {
    let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let temporaryPath = "\(directoryPath)/\(fileName).tmp-\(getpid())-\(suffix)"
    let fd = open(
      temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    guard fd >= 0 else {
      throw systemError(
        "open", errno, "A temporary file cannot be created next to the store.",
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
      throw systemError(
        "fchmod", errno, "The temporary file's mode cannot be set.",
        path: temporaryPath)
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
      throw systemError(
        "write", writeError, "The temporary file cannot be written.",
        path: temporaryPath)
    }
    guard fullSync(fd) == 0 else {
      throw systemError(
        "fsync", errno, "The temporary file cannot be synced.",
        path: temporaryPath)
    }
    isOpen = false
    guard close(fd) == 0 else {
      throw systemError(
        "close", errno, "The temporary file cannot be closed.",
        path: temporaryPath)
    }
    guard rename(temporaryPath, path) == 0 else {
      throw systemError("rename", errno, "The new file cannot replace the store.", path: path)
    }
    renamed = true
    syncDirectory()
    return try? currentIdentity()
  }

  private func syncDirectory() {
    let fd = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else {
      report(
        systemError(
          "open", errno, "The store's directory cannot be synced.",
          path: directoryPath))
      return
    }
    defer { close(fd) }
    if fsync(fd) != 0 {
      report(
        systemError(
          "fsync", errno, "The store's directory cannot be synced.",
          path: directoryPath))
    }
  }

  private func fullSync(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
      // fsync on Apple platforms does not flush the drive's cache; F_FULLFSYNC does.
      if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
    #endif
    return fsync(fd)
  }

  /// Renames the store file to `<name>.corrupt-<UTC timestamp>`.
  ///
  /// - Returns: The new file name.
  private func moveAsideBadFile() throws(TokenStoreError) -> String {
    let stamp = Self.timestamp()
    var candidate = "\(fileName).corrupt-\(stamp)"
    var attempt = 1
    var info = stat()
    while lstat("\(directoryPath)/\(candidate)", &info) == 0 {
      attempt += 1
      candidate = "\(fileName).corrupt-\(stamp)-\(attempt)"
    }
    guard rename(path, "\(directoryPath)/\(candidate)") == 0 else {
      throw systemError("rename", errno, "A bad store file cannot be moved aside.", path: path)
    }
    syncDirectory()
    return candidate
  }

  /// Deletes the moved-aside copies `<name>.corrupt-*` but the newest `keepingNewest`. Runs
  /// under the file lock. Anything there that is not a regular file is left alone.
  private func deleteQuarantinedFiles(keepingNewest: Int) throws(TokenStoreError) {
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: directoryPath)
    } catch {
      throw TokenStoreError(
        .ioFailure, "The store's directory cannot be listed to delete quarantined copies.",
        path: directoryPath)
    }
    let prefix = "\(fileName).corrupt-"
    // `<stamp>` or `<stamp>-<n>` (a name taken within the same millisecond); stamps sort by
    // time as text.
    let copies = names.filter { $0.hasPrefix(prefix) }.map { name in
      let rest = name.dropFirst(prefix.count)
      let parts = rest.split(separator: "-", maxSplits: 1)
      let attempt = parts.count == 2 ? Int(parts[1]) ?? 0 : 1
      return (name: name, stamp: String(parts.first ?? ""), attempt: attempt)
    }.sorted { ($0.stamp, $0.attempt) < ($1.stamp, $1.attempt) }
    for copy in copies.dropLast(keepingNewest) {
      let copyPath = "\(directoryPath)/\(copy.name)"
      var info = stat()
      guard lstat(copyPath, &info) == 0, FileIdentity(info).isRegularFile else { continue }
      if unlink(copyPath) != 0 && errno != ENOENT {
        throw systemError(
          "unlink", errno, "A quarantined copy of a bad store file cannot be deleted.",
          path: copyPath)
      }
    }
  }

  /// A writer killed between creating and renaming its temporary file leaves it behind. Under
  /// the file lock no other cooperating writer has one in progress, so all are stale.
  private func removeStaleTemporaryFilesOnce() {
    guard !state.withLock({ $0.removedStaleTemporaryFiles }) else { return }
    state.withLock { $0.removedStaleTemporaryFiles = true }
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directoryPath)
    else { return }
    let prefix = "\(fileName).tmp-"
    for name in names where name.hasPrefix(prefix) {
      unlink("\(directoryPath)/\(name)")
    }
  }

  // MARK: - The cross-process lock

  /// Runs `body` holding an exclusive `flock` on `<name>.lock`, creating the directory and the
  /// lock file (mode 0600) when missing.
  private func withFileLock<T>(
    _ body: () throws(TokenStoreError) -> T
  ) throws(TokenStoreError) -> T {
    var fd = openLockFile()
    if fd < 0 && errno == ENOENT {
      try createDirectory()
      fd = openLockFile()
    }
    guard fd >= 0 else {
      let code = errno
      if code == ELOOP {
        throw TokenStoreError(
          .notARegularFile, "The lock file is a symbolic link; it is never followed.",
          path: lockPath)
      }
      throw systemError("open", code, "The store's lock file cannot be opened.", path: lockPath)
    }
    defer { close(fd) }  // Closing the descriptor releases the lock.
    switch acquireLock(fd) {
    case .acquired:
      return try body()
    case .timedOut:
      throw TokenStoreError(
        .lockTimeout,
        "The store's lock file stayed locked by another process or open file for the"
          + " \(lockTimeout) lock timeout; nothing was changed.",
        path: lockPath)
    case .failed(let code):
      throw systemError("flock", code, "The store's lock cannot be taken.", path: lockPath)
    }
  }

  /// Opens `<name>.lock` (never through a symbolic link), creating it with mode 0600.
  private func openLockFile() -> Int32 {
    open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
  }

  private enum LockOutcome: Equatable {
    case acquired
    /// Held elsewhere for the whole ``FileTokenStore/lockTimeout``.
    case timedOut
    /// `flock` failed for another reason (the `errno`).
    case failed(Int32)
  }

  /// Takes an exclusive `flock` on the descriptor, waiting at most ``lockTimeout``.
  ///
  /// A blocking `flock(LOCK_EX)` would wait forever for a holder that never lets go (a hung
  /// process, a descriptor leaked in this one), and with it every call queued behind it. So it
  /// polls with `LOCK_NB`, sleeping between attempts, 1 ms at first and doubling up to 50 ms.
  /// Sleeping is fine here: this runs on the store's own queue, never on the cooperative pool.
  private func acquireLock(_ fd: Int32) -> LockOutcome {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: lockTimeout)
    var pause = Duration.milliseconds(1)
    while true {
      if flock(fd, LOCK_EX | LOCK_NB) == 0 { return .acquired }
      let code = errno
      if code == EINTR { continue }
      guard code == EWOULDBLOCK || code == EAGAIN else { return .failed(code) }
      let now = clock.now
      guard now < deadline else { return .timedOut }
      Self.sleep(min(pause, now.duration(to: deadline)))
      pause = min(pause * 2, .milliseconds(50))
    }
  }

  /// Blocks the calling thread (the store's queue) for `duration`.
  private static func sleep(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(
      tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR {
      request = remaining
    }
  }

  private func createDirectory() throws(TokenStoreError) {
    do {
      try FileManager.default.createDirectory(
        atPath: directoryPath, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    } catch {
      throw TokenStoreError(
        .ioFailure, "The store's directory cannot be created.", path: directoryPath)
    }
  }

  // MARK: - Helpers

  private func report(_ issue: TokenStoreError) {
    onIssue?(issue)
  }

  private func systemError(
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

  /// `20261129T204306.123Z`, from the wall clock.
  private static func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var seconds = now.tv_sec
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    let millis = Int32(now.tv_nsec / 1_000_000)
    return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1, 2) + pad(parts.tm_mday, 2)
      + "T" + pad(parts.tm_hour, 2) + pad(parts.tm_min, 2) + pad(parts.tm_sec, 2)
      + "." + pad(millis, 3) + "Z"
  }
}

/// Which file a snapshot was read from: a change of any field means the file was replaced.
private struct FileIdentity: Equatable {
  var device: UInt64
  var inode: UInt64
  var size: Int64
  var modifiedSeconds: Int64
  var modifiedNanoseconds: Int64
  var type: UInt32

  init(_ info: stat) {
    device = UInt64(truncatingIfNeeded: info.st_dev)
    inode = UInt64(truncatingIfNeeded: info.st_ino)
    size = Int64(info.st_size)
    #if canImport(Darwin)
      let modified = info.st_mtimespec
    #else
      let modified = info.st_mtim
    #endif
    modifiedSeconds = Int64(modified.tv_sec)
    modifiedNanoseconds = Int64(modified.tv_nsec)
    type = UInt32(info.st_mode) & UInt32(S_IFMT)
  }

  var isRegularFile: Bool { type == UInt32(S_IFREG) }
  var isSymbolicLink: Bool { type == UInt32(S_IFLNK) }
}
