import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// The lease file on disk: one read-modify-write under a brief flock, the atomic replace, and an
// unlocked read for the watcher. Everything here runs on the lease's queue.
extension FileAuthorizationLease {
  /// What is at the lease path.
  enum DiskState {
    case missing
    /// A record; `clamped`: values read were clamped (written back by the next change).
    case good(FileIdentity, LeaseRecord, clamped: Bool)
    /// Not a lease record (garbage, torn by something else, oversized): replaced by the next
    /// change, with every earlier grant made not current.
    case bad(FileIdentity, TokenStoreError)
    /// Written by a newer format version: never replaced.
    case newer(FileIdentity, TokenStoreError)
  }

  /// Reads the record under the lock, lets `change` edit it (given the time of the change, on
  /// both clocks), drops the history no grant needs any more
  /// (``LeaseRecord/dropHistory(at:keeping:)``), and replaces the file when the record changed
  /// (or the file was missing or bad and had to be recreated). The lock is held for the read,
  /// the write and nothing else; it is released before this returns.
  ///
  /// A record that would still encode to more than ``LeaseRecord/maximumSize`` once its
  /// history is dropped down to ``LeaseRecord/minimumHistoryRetention`` is not written: the
  /// change throws ``TokenStoreError/Code/fileTooLarge`` and the file stays as it was (a change
  /// that only dropped history or clamped values is simply not written). Never is a record
  /// that grew too large replaced by an empty one: that would forget live grants and
  /// sign-outs.
  func transact<T>(
    _ change: (inout LeaseRecord, HostTime) -> T
  ) throws(TokenStoreError) -> T {
    try withFileLock { () throws(TokenStoreError) -> T in
      removeStaleTemporaryFilesOnce()
      let known = state.withLock { $0.lastRecord }
      var base: LeaseRecord
      var mustWrite = false
      var housekeeping = false
      switch try readDisk() {
      case .missing:
        absorb(Observation(identity: nil, content: .missing))
        base = LeaseRecord.fresh(after: known, wallClock: clock.wall())
      case .good(let identity, let record, let clamped):
        base = record
        // Values clamped on reading are written back, so that they hold from now on.
        housekeeping = clamped
        absorb(Observation(identity: identity, content: .record(record)))
      case .bad(let identity, var problem):
        problem.message +=
          " It is replaced by an empty record; every earlier grant is no longer current."
        report(problem)
        absorb(Observation(identity: identity, content: .unreadable))
        base = LeaseRecord.fresh(after: known, wallClock: clock.wall())
        mustWrite = true
      case .newer(_, let error):
        throw error
      }
      var record = base
      let time = clock.now()
      let result = change(&record, time)
      let changed = mustWrite || record != base
      let unpruned = record
      record.dropHistory(at: time, keeping: LeaseRecord.historyRetention)
      guard changed || housekeeping || record != base else { return result }
      var data = try record.encoded()
      if data.count > LeaseRecord.compactionThreshold {
        // From the record before the routine pass, whose marks without a time are still
        // without one (they count as old here).
        record = unpruned
        record.dropHistory(at: time, keeping: LeaseRecord.minimumHistoryRetention)
        data = try record.encoded()
      }
      if data.count > LeaseRecord.maximumSize {
        guard changed else { return result }
        throw TokenStoreError(
          .fileTooLarge,
          "The lease record would be larger than \(LeaseRecord.maximumSize) bytes even without"
            + " the sign-outs of more than an hour ago that no grant needs; the change was"
            + " refused and the lease file kept.", path: path)
      }
      let identity = try replaceFile(with: data)
      absorb(Observation(identity: identity, content: .record(record)))
      return result
    }
  }

  /// Runs `body` holding an exclusive `flock` on `<url>.lock`, waiting at most ``lockTimeout``.
  func withFileLock<T>(_ body: () throws(TokenStoreError) -> T) throws(TokenStoreError) -> T {
    try file.withExclusiveLock(timeout: lockTimeout, body)
  }

  /// Reads and decodes the lease file without any lock (every writer replaces it with one
  /// `rename`). Throws only when it cannot be read at all.
  func readDisk() throws(TokenStoreError) -> DiskState {
    switch try file.read(maximumSize: LeaseRecord.maximumReadSize) {
    case .missing:
      return .missing
    case .tooLarge(let identity):
      return .bad(
        identity,
        TokenStoreError(
          .fileTooLarge, "The lease file is larger than \(LeaseRecord.maximumReadSize) bytes.",
          path: path))
    case .data(let data, let identity):
      do throws(TokenStoreError) {
        let (record, clamped) = try LeaseRecord.decodeClamping(data, at: clock.now())
        return .good(identity, record, clamped: clamped)
      } catch {
        var error = error
        error.path = path
        return error.code == .unsupportedVersion ? .newer(identity, error) : .bad(identity, error)
      }
    }
  }

  /// The identity of what is at the path now (`nil`: nothing, or not examinable).
  func currentIdentity() -> FileIdentity? {
    var info = stat()
    guard lstat(path, &info) == 0 else { return nil }
    return FileIdentity(info)
  }

  func systemError(
    _ call: String, _ code: Int32, _ message: String, path: String
  ) -> TokenStoreError {
    DurableFile.systemError(call, code, message, path: path)
  }
}
