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
  typealias LockOutcome = DurableFile.LockOutcome

  /// Runs `body` holding an exclusive `flock` on `<name>.lock`, creating the directory and the
  /// lock file (mode 0600) when missing, waiting at most ``lockTimeout``.
  func withFileLock<T>(
    _ body: () throws(TokenStoreError) -> T
  ) throws(TokenStoreError) -> T {
    try file.withExclusiveLock(timeout: lockTimeout, body)
  }

  /// Opens `<name>.lock` (never through a symbolic link), creating it with mode 0600.
  func openLockFile() -> Int32 { file.openLockFile() }

  /// Takes an exclusive `flock` on the descriptor, waiting at most ``lockTimeout``. Sleeping
  /// between attempts is fine here: this runs on the store's own queue, never on the
  /// cooperative pool.
  func acquireLock(_ fd: Int32) -> LockOutcome {
    DurableFile.acquireLock(fd, timeout: lockTimeout)
  }

  func createDirectory() throws(TokenStoreError) { try file.createDirectory() }
}
