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

// Writing the store file: read-modify-write under the lock, the atomic replace, and syncing.
extension FileTokenStore {
  /// Read-modify-write under the file lock, re-reading the file first.
  ///
  /// - Parameter deletingQuarantinedFiles: Whether to delete every `.corrupt-*` copy too (a
  ///   removal: the copies may hold the tokens being removed, and cannot be edited).
  func modify(
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
  func replaceFile(with data: Data) throws(TokenStoreError) -> FileIdentity? {
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

  func syncDirectory() {
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

  func fullSync(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
      // fsync on Apple platforms does not flush the drive's cache; F_FULLFSYNC does.
      if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
    #endif
    return fsync(fd)
  }

  /// A writer killed between creating and renaming its temporary file leaves it behind. Under
  /// the file lock no other cooperating writer has one in progress, so all are stale.
  func removeStaleTemporaryFilesOnce() {
    guard !state.withLock({ $0.removedStaleTemporaryFiles }) else { return }
    state.withLock { $0.removedStaleTemporaryFiles = true }
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directoryPath)
    else { return }
    let prefix = "\(fileName).tmp-"
    for name in names where name.hasPrefix(prefix) {
      unlink("\(directoryPath)/\(name)")
    }
  }
}
