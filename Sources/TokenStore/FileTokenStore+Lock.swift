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

// The cross-process lock on `<name>.lock`: taken with a bounded wait, never across an await.
extension FileTokenStore {
  /// Runs `body` holding an exclusive `flock` on `<name>.lock`, creating the directory and the
  /// lock file (mode 0600) when missing.
  func withFileLock<T>(
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
  func openLockFile() -> Int32 {
    open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, mode_t(0o600))
  }

  enum LockOutcome: Equatable {
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
  func acquireLock(_ fd: Int32) -> LockOutcome {
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
  static func sleep(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(
      tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR {
      request = remaining
    }
  }

  func createDirectory() throws(TokenStoreError) {
    do {
      try FileManager.default.createDirectory(
        atPath: directoryPath, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
    } catch {
      throw TokenStoreError(
        .ioFailure, "The store's directory cannot be created.", path: directoryPath)
    }
  }
}
