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
    try modify(deletingQuarantinedFiles: deletingQuarantinedFiles) { models, _ in change(&models) }
  }

  /// Read-modify-write of the models and their fences (``FencedTokenStore``) under the file
  /// lock, re-reading the file first. A fence is kept only while its key has a model.
  func modify(
    deletingQuarantinedFiles: Bool = false,
    _ change: (inout [AccountKey: AuthModel], inout [AccountKey: UInt64]) -> Void
  ) throws(TokenStoreError) {
    try modify(deletingQuarantinedFiles: deletingQuarantinedFiles) { models, fences, _ in
      change(&models, &fences)
    }
  }

  /// Read-modify-write of the models, their fences and the revoked fences
  /// (``FencedTokenStore``) under the file lock, re-reading the file first. A fence is kept
  /// only while its key has a model.
  func modify(
    deletingQuarantinedFiles: Bool = false,
    _ change: (
      inout [AccountKey: AuthModel], inout [AccountKey: UInt64], inout RevokedFences
    ) -> Void
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
        var fences = current.fences
        var revoked = current.revoked
        change(&models, &fences, &revoked)
        fences = fences.filter { models[$0.key] != nil }
        guard
          models != current.models || fences != current.fences
            || revoked != current.revoked
        else { return }
        let data = try StoreFileFormat.encode(models, fences: fences, revoked: revoked)
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
        state.withLock {
          $0.cache = Snapshot(
            identity: identity, models: models, fences: fences, revoked: revoked)
        }
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

  /// Replaces the store file atomically and durably (``DurableFile/replace(with:onIssue:)``).
  ///
  /// - Returns: The new file's identity (`nil` if it could not be read back).
  func replaceFile(with data: Data) throws(TokenStoreError) -> FileIdentity? {
    try file.replace(with: data, onIssue: report)
    return try? currentIdentity()
  }

  func syncDirectory() { file.syncDirectory(onIssue: report) }

  /// A writer killed between creating and renaming its temporary file leaves it behind. Under
  /// the file lock no other cooperating writer has one in progress, so all are stale.
  func removeStaleTemporaryFilesOnce() {
    guard !state.withLock({ $0.removedStaleTemporaryFiles }) else { return }
    state.withLock { $0.removedStaleTemporaryFiles = true }
    file.removeStaleTemporaryFiles()
  }
}
