import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// Replacing the lease file atomically: a temporary file (0600), fsync, rename, directory fsync;
// and the leftovers of a writer killed in between.
extension FileAuthorizationLease {
  /// Writes a temporary file (0600), syncs it, renames it over the lease file, syncs the
  /// directory.
  ///
  /// - Returns: The new file's identity.
  func replaceFile(with data: Data) throws(TokenStoreError) -> FileIdentity? {
    let suffix = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    let temporaryPath = "\(directoryPath)/\(fileName).tmp-\(getpid())-\(suffix)"
    let fd = open(
      temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
    guard fd >= 0 else {
      throw systemError(
        "open", errno, "A temporary file cannot be created next to the lease file.",
        path: temporaryPath)
    }
    var renamed = false
    var isOpen = true
    defer {
      if isOpen { close(fd) }
      if !renamed { unlink(temporaryPath) }
    }
    guard fchmod(fd, mode_t(0o600)) == 0 else {
      throw systemError("fchmod", errno, "The temporary file's mode cannot be set.", path: path)
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
      throw systemError("write", writeError, "The temporary file cannot be written.", path: path)
    }
    guard fullSync(fd) == 0 else {
      throw systemError("fsync", errno, "The temporary file cannot be synced.", path: path)
    }
    isOpen = false
    guard close(fd) == 0 else {
      throw systemError("close", errno, "The temporary file cannot be closed.", path: path)
    }
    guard rename(temporaryPath, path) == 0 else {
      throw systemError("rename", errno, "The new record cannot replace the lease.", path: path)
    }
    renamed = true
    syncDirectory()
    return currentIdentity()
  }

  func syncDirectory() {
    let fd = open(directoryPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    if fsync(fd) != 0 {
      report(
        systemError(
          "fsync", errno, "The lease file's directory cannot be synced.", path: directoryPath))
    }
  }

  func fullSync(_ fd: Int32) -> Int32 {
    #if canImport(Darwin)
      if fcntl(fd, F_FULLFSYNC) == 0 { return 0 }
    #endif
    return fsync(fd)
  }

  /// A writer killed between creating and renaming its temporary file leaves it behind; under
  /// the lock no cooperating writer has one in progress, so all are stale.
  func removeStaleTemporaryFilesOnce() {
    let first = state.withLock { state in
      defer { state.cleaned = true }
      return !state.cleaned
    }
    guard first else { return }
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: directoryPath)
    else { return }
    for name in names where name.hasPrefix("\(fileName).tmp-") {
      unlink("\(directoryPath)/\(name)")
    }
  }

  func createDirectory() throws(TokenStoreError) {
    do {
      try FileManager.default.createDirectory(
        atPath: directoryPath, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    } catch {
      throw TokenStoreError(
        .ioFailure, "The lease file's directory cannot be created.", path: directoryPath)
    }
  }
}
