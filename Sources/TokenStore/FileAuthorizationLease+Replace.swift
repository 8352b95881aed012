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
  /// Replaces the lease file atomically and durably (``DurableFile/replace(with:onIssue:)``).
  ///
  /// - Returns: The new file's identity.
  func replaceFile(with data: Data) throws(TokenStoreError) -> FileIdentity? {
    try file.replace(with: data, onIssue: report)
    return currentIdentity()
  }

  /// A writer killed between creating and renaming its temporary file leaves it behind; under
  /// the lock no cooperating writer has one in progress, so all are stale.
  func removeStaleTemporaryFilesOnce() {
    let first = state.withLock { state in
      defer { state.cleaned = true }
      return !state.cleaned
    }
    guard first else { return }
    file.removeStaleTemporaryFiles()
  }

  func createDirectory() throws(TokenStoreError) { try file.createDirectory() }
}
