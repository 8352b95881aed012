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
/// try await store.save(model, for: AccountKey(account: "u1"))
/// let again = try await store.model(for: AccountKey(account: "u1"))
/// ```
///
/// Guarantees (see `Sources/TokenStore/Documentation.docc/TokenStores.md` for the file format):
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
///   ``removeModels(forAccount:)`` and ``removeAll()`` delete all of them: after a logout no
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
public final class FileTokenStore: FencedTokenStore {
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

  /// The file's durable replace, its lock, its paths.
  let file: DurableFile
  var path: String { file.path }
  var directoryPath: String { file.directoryPath }
  var fileName: String { file.fileName }
  var lockPath: String { file.lockPath }
  let onIssue: (@Sendable (TokenStoreError) -> Void)?
  let queue: DispatchQueue
  let state = LockedState(State())

  struct State {
    var cache: Snapshot?
    var removedStaleTemporaryFiles = false
  }

  /// What the store believes the file holds.
  struct Snapshot {
    /// The file the models were read from (`nil`: there was no file).
    var identity: FileIdentity?
    var models: [AccountKey: AuthModel]
    /// Set when the file must not be replaced (a newer version wrote it).
    var writeBlocker: TokenStoreError?
    /// The fences the models were saved with (``FencedTokenStore``).
    var fences: [AccountKey: UInt64] = [:]
    /// The revoked fences (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``).
    var revoked = RevokedFences()
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
    file = DurableFile(url: url, noun: "the store", holdsSecrets: true, onIssue: onIssue)
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

  /// Stores `model` for `key` unless a fenced save with a larger fence wrote the key's current
  /// model (``FencedTokenStore``): checked and written in one read-modify-write under the
  /// store's lock, so it is atomic across processes. The fence is kept in the file with the
  /// model.
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  ///   - fence: The fence of the caller's grant.
  /// - Returns: Whether the model was stored; `false` leaves the file as it was.
  /// - Throws: ``TokenStoreError``, as ``save(_:for:)`` does.
  public func save(
    _ model: AuthModel, for key: AccountKey, fence: UInt64
  ) async throws(TokenStoreError) -> Bool {
    try await perform { store throws(TokenStoreError) in
      var stored = true
      try store.modify { models, fences, revoked in
        if models[key] != nil, let landed = fences[key], landed > fence {
          stored = false
          return
        }
        if revoked.refuses(fence, for: key.account) {
          stored = false
          return
        }
        models[key] = model
        fences[key] = fence
      }
      return stored
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

  /// Removes every model of `account`, in every mode, in one atomic replace, and deletes every
  /// quarantined copy of a bad file (which may hold them).
  ///
  /// - Parameter account: The user id.
  /// - Throws: ``TokenStoreError``, as ``removeModel(for:)`` does.
  public func removeModels(forAccount account: String) async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { entries in
        for key in entries.keys where key.account == account { entries[key] = nil }
      }
    }
  }

  /// Removes every model of `account`, as ``removeModels(forAccount:)`` does, and refuses
  /// every later fenced save of its keys with a fence at most `fence`, in the same atomic
  /// replace (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``). The mark
  /// is kept in the file: one number per account.
  ///
  /// - Parameters:
  ///   - account: The user id.
  ///   - fence: The largest fence of a grant the account's sign-out revoked.
  /// - Throws: ``TokenStoreError``, as ``removeModel(for:)`` does.
  public func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async throws(TokenStoreError)
  {
    let account = AccountKey.normalized(account)
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { models, _, revoked in
        for key in models.keys where key.account == account { models[key] = nil }
        revoked.mark(account, through: fence)
      }
    }
  }

  /// Removes every model, as ``removeAll()`` does, and refuses every later fenced save with a
  /// fence at most `fence` (``FencedTokenStore/removeAll(refusingFencesThrough:)``).
  ///
  /// - Parameter fence: The largest fence of a grant the sign-out of everyone revoked.
  /// - Throws: ``TokenStoreError``, as ``removeModel(for:)`` does.
  public func removeAll(refusingFencesThrough fence: UInt64) async throws(TokenStoreError) {
    try await perform { store throws(TokenStoreError) in
      try store.modify(deletingQuarantinedFiles: true) { models, _, revoked in
        models.removeAll()
        revoked.markAll(through: fence)
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

  func perform<T: Sendable>(
    _ body: @escaping @Sendable (FileTokenStore) throws(TokenStoreError) -> T
  ) async throws(TokenStoreError) -> T {
    let result: Result<T, TokenStoreError> = await withCheckedContinuation { continuation in
      queue.async {
        continuation.resume(returning: Result { () throws(TokenStoreError) -> T in try body(self) })
      }
    }
    return try result.get()
  }

  // MARK: - Helpers

  func report(_ issue: TokenStoreError) {
    onIssue?(issue)
  }

  func systemError(
    _ call: String, _ code: Int32, _ message: String, path: String
  ) -> TokenStoreError {
    DurableFile.systemError(call, code, message, path: path)
  }
}
