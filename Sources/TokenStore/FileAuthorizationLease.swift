import Dispatch
import Foundation
import SyncPrimitives

/// An ``AuthorizationLease`` in a file: for processes on one host, and an iOS app and its
/// extensions sharing an app group container.
///
/// ```swift
/// let store = FileTokenStore(url: group.appending(path: "auth/tokens.store"))
/// let lease = FileAuthorizationLease(nextTo: store)  // auth/tokens.store.lease
/// ```
///
/// The lease file holds a small JSON record: the next fence, the sign-out generation, each
/// user's last sign-out and who did it, the last sign-out of everyone, and the holders (owner,
/// fence, expiry) by key. See `Sources/TokenStore/Documentation.docc/TokenStores.md` ("The lease file").
///
/// - **History kept while a grant needs it.** A back-off goes once it ended; a sign-out once it
///   is a year old and older than every grant the file holds (a grant taken before it that the
///   file no longer holds then reads as not current), or down to the last hour when the record
///   would be larger than 32 KiB. A change that would still make the file larger than 1 MiB
///   throws ``TokenStoreError/Code/fileTooLarge`` and leaves the file as it was: the file is
///   never emptied for its size, which would end live grants.
///
/// - **A brief lock, never a held one.** Every operation is one read-modify-write under an
///   exclusive `flock` on `<name>.lock`, waited for at most ``lockTimeout`` and released before
///   the operation returns; the file is then replaced atomically (temporary file `0600`,
///   `fsync`, `rename`, directory `fsync`). While a grant is held no kernel lock is: on iOS a
///   suspended app holding a file lock in a shared container is terminated (0xdead10cc), and an
///   authorization can take minutes.
/// - **Semantics of ``InMemoryAuthorizationLease``.** A holder that died is taken over once
///   its grant expired, with a larger fence.
/// - **Expiries on the host's boot clock.** Processes compare expiries on a clock that never
///   steps and that every process of the host shares (Linux: `CLOCK_BOOTTIME`; Apple
///   platforms: the continuous clock of `mach_continuous_time`), recorded with the boot's
///   identity (Linux: `/proc/sys/kernel/random/boot_id`; Apple platforms:
///   `kern.bootsessionuuid`). Setting the wall clock, by hand or by NTP, forwards or backwards,
///   neither lets another process take a live grant over nor delays the takeover of a dead
///   holder's; a holder recorded in an earlier boot has expired. The dates the lease reports
///   (``LeaseGrant/expiresAt``, ``LeaseAttempt/heldElsewhere(owner:expiresAt:)``) are the time
///   left on that clock counted from the wall clock. Where there is no boot clock, or when a
///   clock is given to ``init(url:lockTimeout:pollInterval:now:onIssue:)``, expiries are
///   compared on the wall clock, as are those of holders written by earlier versions of this
///   package (their records have no boot-clock expiry).
/// - **A bad file** (garbage, an inconsistent record, over 2 MiB) never crashes: it is reported to
///   `onIssue` and replaced by an empty record whose generation floor makes every earlier
///   grant not current, and subscribers get ``LeaseChange/unknown``. A file of a newer format
///   version is never replaced: every operation throws
///   ``TokenStoreError/Code/unsupportedVersion``.
/// - **Symbolic links** at the lease path or its lock file are never followed
///   (``TokenStoreError/Code/notARegularFile``).
///
/// **Noticing other processes.** ``changes()`` notices other processes' changes without
/// busy-waiting. While a lease has at least one subscriber it keeps one kernel notification
/// on the file's directory (Linux: one inotify descriptor and one dispatch read source; Apple
/// platforms: one `O_EVTONLY` descriptor and one vnode dispatch source) and one timer that
/// `lstat`s the file every ``pollInterval`` (missed events, filesystems without
/// notifications). A notification costs one read of the small file (on Linux only events for
/// the lease file's name count); a poll costs one `lstat`, plus the read when the file's
/// identity changed. With notifications a change is announced as soon as its `rename` lands, typically
/// within a millisecond; without them, at most ``pollInterval`` late. With no subscriber the
/// lease watches nothing. This lease's own changes are announced to its subscribers right
/// after its write. A first subscriber also gets what changed since this lease's last
/// operation, so subscribing just after an `acquire` that found the key held misses nothing.
///
/// Operations run one at a time on a private serial queue (never on the Swift concurrency
/// pool: `flock` and `fsync` block), and are not cancellable once started.
public final class FileAuthorizationLease: AuthorizationLease {
  /// The default ``pollInterval``: 1 second.
  public static let defaultPollInterval: Duration = .seconds(1)

  /// The lease file.
  public let url: URL
  /// How long an operation waits for the lock on `<name>.lock` before it throws
  /// ``TokenStoreError/Code/lockTimeout``.
  public let lockTimeout: Duration
  /// How often, while there are subscribers, the file's identity is checked in case a
  /// notification was missed.
  public let pollInterval: Duration

  /// The file's durable replace, its lock, its paths.
  let file: DurableFile
  var path: String { file.path }
  var directoryPath: String { file.directoryPath }
  var fileName: String { file.fileName }
  var lockPath: String { file.lockPath }
  /// The clocks expiries are measured on (``HostClock/system`` unless a test injects one).
  let clock: HostClock
  let onIssue: (@Sendable (TokenStoreError) -> Void)?
  let queue = DispatchQueue(label: "AuthCoordinator.FileAuthorizationLease", qos: .utility)
  let state = LockedState(State())
  let watcher: LeaseFileWatcher

  struct State: Sendable {
    var subscribers: [UInt64: AsyncStream<LeaseChange>.Continuation] = [:]
    var nextSubscriber: UInt64 = 0
    /// What this lease last saw of the file (`nil`: never looked).
    var lastSeen: Observation?
    /// The last record read or written: fresh records start above its counters.
    var lastRecord: LeaseRecord?
    var cleaned = false
  }

  /// Creates a lease backed by the file at `url`. Nothing is read until the first call.
  ///
  /// - Parameters:
  ///   - url: The lease file. Its directory is created (mode `0700`) when missing; the lock
  ///     file is `<url>.lock`.
  ///   - lockTimeout: How long an operation waits for the brief lock another process holds
  ///     before it throws ``TokenStoreError/Code/lockTimeout``; 5 seconds by default.
  ///     Negative values count as zero.
  ///   - pollInterval: How often, while ``changes()`` has subscribers, the file is checked in
  ///     case a notification was missed; ``defaultPollInterval`` by default (at least 10 ms).
  ///   - now: `nil` (the default): expiries are compared on the host's boot clock, which never
  ///     steps. A clock: expiries are measured on it instead, as an ``InMemoryAuthorizationLease``
  ///     measures them (tests inject one); processes that share the file must then share it.
  ///   - onIssue: Called (on the lease's private queue) with every problem the lease handles
  ///     itself instead of throwing: a bad file replaced, a newer-version file seen by the
  ///     watcher, a directory that cannot be watched or synced.
  public convenience init(
    url: URL,
    lockTimeout: Duration = FileTokenStore.defaultLockTimeout,
    pollInterval: Duration = FileAuthorizationLease.defaultPollInterval,
    now: (@Sendable () -> Date)? = nil,
    onIssue: (@Sendable (TokenStoreError) -> Void)? = nil
  ) {
    self.init(
      url: url, lockTimeout: lockTimeout, pollInterval: pollInterval,
      clock: now.map(HostClock.wallOnly) ?? .system, onIssue: onIssue)
  }

  /// Creates a lease on the given clocks: the seam through which a test steps the wall clock
  /// and moves the boot clock on its own.
  package init(
    url: URL,
    lockTimeout: Duration = FileTokenStore.defaultLockTimeout,
    pollInterval: Duration = FileAuthorizationLease.defaultPollInterval,
    clock: HostClock,
    onIssue: (@Sendable (TokenStoreError) -> Void)? = nil
  ) {
    self.url = url
    self.lockTimeout = max(.zero, lockTimeout)
    self.pollInterval = max(.milliseconds(10), pollInterval)
    let file = DurableFile(url: url, noun: "the lease file", onIssue: onIssue)
    self.file = file
    self.clock = clock
    self.onIssue = onIssue
    watcher = LeaseFileWatcher(
      queue: queue, directoryPath: file.directoryPath, fileName: file.fileName,
      pollInterval: self.pollInterval)
  }

  /// Creates the lease of `store`: the file `<store's file>.lease` next to it.
  ///
  /// - Parameters:
  ///   - store: The token store whose processes share the lease.
  ///   - lockTimeout: As in ``init(url:lockTimeout:pollInterval:now:onIssue:)``.
  ///   - pollInterval: As in ``init(url:lockTimeout:pollInterval:now:onIssue:)``.
  ///   - now: As in ``init(url:lockTimeout:pollInterval:now:onIssue:)``.
  ///   - onIssue: As in ``init(url:lockTimeout:pollInterval:now:onIssue:)``.
  public convenience init(
    nextTo store: FileTokenStore,
    lockTimeout: Duration = FileTokenStore.defaultLockTimeout,
    pollInterval: Duration = FileAuthorizationLease.defaultPollInterval,
    now: (@Sendable () -> Date)? = nil,
    onIssue: (@Sendable (TokenStoreError) -> Void)? = nil
  ) {
    self.init(
      url: URL(fileURLWithPath: store.path + ".lease"), lockTimeout: lockTimeout,
      pollInterval: pollInterval, now: now, onIssue: onIssue)
  }

  deinit {
    watcher.stop()
    let subscribers = state.withLock { $0.subscribers.values }
    for subscriber in subscribers { subscriber.finish() }
  }

  // MARK: - Changes

  /// A new subscription to releases and sign-outs, by this lease and by every other process
  /// (or instance) using the file.
  ///
  /// The first subscriber starts watching the file; when the last one stops, watching stops.
  ///
  /// - Returns: The changes from now on (and those since this lease's last operation); the
  ///   stream ends when the lease is deallocated.
  public func changes() -> AsyncStream<LeaseChange> {
    subscribe()
  }

  // MARK: - Running operations off the cooperative pool

  func perform<T: Sendable>(
    _ body: @escaping @Sendable (FileAuthorizationLease) throws(TokenStoreError) -> T
  ) async throws(TokenStoreError) -> T {
    let result: Result<T, TokenStoreError> = await withCheckedContinuation { continuation in
      queue.async {
        continuation.resume(returning: Result { () throws(TokenStoreError) -> T in try body(self) })
      }
    }
    return try result.get()
  }

  /// Returns once everything queued before it (a first subscriber's start of watching) ran.
  func synchronize() async {
    _ = try? await perform { _ in () }
  }

  func report(_ issue: TokenStoreError) {
    onIssue?(issue)
  }

  /// A grant's time to live in seconds: negative counts as zero, and at most
  /// ``LeaseRecord/maximumTimeToLive`` (one year), so that every expiry written reads back as
  /// plausible (``LeaseRecord/isPlausibleExpiry(_:now:)``).
  static func seconds(_ duration: Duration) -> TimeInterval {
    min(max(duration.seconds, 0), LeaseRecord.maximumTimeToLive)
  }
}
