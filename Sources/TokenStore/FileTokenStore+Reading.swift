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

// Reading the store file: the cached snapshot, the file's identity, and what a bad file becomes.
extension FileTokenStore {
  func currentSnapshot() throws(TokenStoreError) -> Snapshot {
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
  func currentSnapshot(issue: inout TokenStoreError?) throws(TokenStoreError) -> Snapshot {
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
  func load(
    moveAside: Bool,
    forWriting: Bool = false,
    issue: inout TokenStoreError?
  ) throws(TokenStoreError) -> Snapshot {
    try absorb(try readDisk(), moveAside: moveAside, forWriting: forWriting, issue: &issue)
  }

  /// Turns what was read into a snapshot, moving a bad file aside when `moveAside` (the lock
  /// is held) and reporting every absorbed problem.
  func absorb(
    _ disk: DiskState,
    moveAside: Bool,
    forWriting: Bool = false,
    issue: inout TokenStoreError?
  ) throws(TokenStoreError) -> Snapshot {
    switch disk {
    case .missing:
      return Snapshot(identity: nil, models: [:])
    case .good(let identity, let contents):
      return Snapshot(
        identity: identity, models: contents.models, fences: contents.fences,
        revoked: contents.revoked)
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

  enum DiskState {
    case missing
    case good(FileIdentity, StoreFileFormat.Contents)
    /// Corrupt, truncated or too large: to be moved aside.
    case bad(FileIdentity, TokenStoreError)
    /// Written by a newer version: to be left alone.
    case newer(FileIdentity, TokenStoreError)
  }

  /// Reads and decodes the file. Throws only when it cannot be read at all.
  func readDisk() throws(TokenStoreError) -> DiskState {
    switch try file.read(maximumSize: maximumFileSize) {
    case .missing:
      return .missing
    case .tooLarge(let identity):
      return .bad(
        identity,
        TokenStoreError(
          .fileTooLarge,
          "The store file is larger than the \(maximumFileSize)-byte limit and was not read.",
          path: path))
    case .data(let data, let identity):
      do throws(TokenStoreError) {
        return .good(identity, try StoreFileFormat.decodeContents(data))
      } catch {
        var error = error
        error.path = path
        return error.code == .unsupportedVersion ? .newer(identity, error) : .bad(identity, error)
      }
    }
  }

  /// The identity of what is at the path now (`nil`: nothing).
  func currentIdentity() throws(TokenStoreError) -> FileIdentity? {
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
}

/// Which file a snapshot was read from: a change of any field means the file was replaced.
struct FileIdentity: Equatable {
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
