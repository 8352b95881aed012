import Foundation

/// The right to authorize one account key, shared by every process that uses one token store:
/// the cross-process half of the coordinator's single flight.
///
/// Processes (an app and its extensions, or worker processes on one host) that share a
/// ``TokenStore`` share a lease too. Before it authorizes, a coordinator takes the key's lease;
/// a process that finds it held waits for the holder's result (it watches ``changes()``) and
/// adopts the model the holder stored, instead of authorizing a second time. That is what keeps
/// a rotating refresh token from being spent twice.
///
/// The contract every implementation keeps:
/// - **One holder per key.** ``acquire(_:owner:timeToLive:)`` grants the key to at most one
///   caller at a time. A lease whose `expiresAt` passed (its holder died, or stopped renewing)
///   may be taken over; a takeover's ``LeaseGrant/fence`` is larger than every earlier one.
/// - **Never held by a lock.** A lease is a record (owner, expiry), changed under a brief lock
///   at most; nothing stays locked while the holder authorizes, which can take minutes. On iOS
///   a suspended app that holds a file lock in a shared container is terminated (0xdead10cc).
/// - **Sign-outs have generations.** ``revokeGrants(ofMcUid:)`` (silently) and
///   ``signOut(mcUid:by:)`` (announced) make every grant taken before them for that user not
///   current (``isCurrent(_:)``): a holder checks it before and after it saves, so a late result
///   never brings a signed-out user back.
/// - **Changes are announced.** ``changes()`` yields after every release and sign-out, in this
///   process or another, so waiters notice without busy-waiting. An implementation that cannot
///   tell what changed yields ``LeaseChange/unknown``.
///
/// Wall-clock time (`Date`) bounds leases, because processes share no other clock. The package
/// ships `InMemoryAuthorizationLease` (coordinators in one process: simulated processes,
/// tests) and `FileAuthorizationLease` (processes on one host, an iOS app group).
public protocol AuthorizationLease: Sendable {
  /// Takes the lease of `key` for `owner` unless a live grant exists.
  ///
  /// - Parameters:
  ///   - key: The account to authorize.
  ///   - owner: Who asks: unique per coordinator (process and instance).
  ///   - timeToLive: How long the grant lasts unless renewed.
  /// - Returns: The grant, or who holds the key and until when.
  /// - Throws: When the lease's storage cannot be read or changed.
  func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws -> LeaseAttempt

  /// Extends a grant the caller still holds.
  ///
  /// - Parameters:
  ///   - grant: The grant to extend.
  ///   - timeToLive: The new time to live, counted from now.
  /// - Returns: The extended grant, or `nil` when the grant is no longer held (it expired and
  ///   was taken over, or was released).
  /// - Throws: When the lease's storage cannot be read or changed.
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant?

  /// Gives the key up, announcing ``LeaseChange/released(_:)``. Does nothing when the grant is
  /// no longer held.
  ///
  /// - Parameter grant: The grant to release.
  /// - Throws: When the lease's storage cannot be read or changed.
  func release(_ grant: LeaseGrant) async throws

  /// Makes every grant of `mcUid`'s keys taken before now not current, without announcing
  /// anything. A logout calls it before it empties the store, and
  /// ``signOut(mcUid:by:)`` after: a holder whose result arrives in between can no longer store
  /// it, and no other process re-reads the store before it is empty.
  ///
  /// - Parameter mcUid: The user.
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeGrants(ofMcUid mcUid: String) async throws

  /// Makes every grant taken before now not current, without announcing anything (the first
  /// half of ``signOutAll(by:)``, as ``revokeGrants(ofMcUid:)`` is of a user's sign-out).
  ///
  /// - Throws: When the lease's storage cannot be read or changed.
  func revokeAllGrants() async throws

  /// Records that `mcUid` signed out: every grant of the user's keys taken before now is no
  /// longer current. Announces ``LeaseChange/signedOut(mcUid:by:)``.
  ///
  /// - Parameters:
  ///   - mcUid: The user.
  ///   - owner: Who signed the user out (so that it can ignore its own announcement).
  /// - Throws: When the lease's storage cannot be read or changed.
  func signOut(mcUid: String, by owner: String) async throws

  /// Records that every user signed out. Announces ``LeaseChange/signedOutAll(by:)``.
  ///
  /// - Parameter owner: Who signed everyone out.
  /// - Throws: When the lease's storage cannot be read or changed.
  func signOutAll(by owner: String) async throws

  /// Whether no sign-out of the grant's user happened since the grant was taken.
  ///
  /// - Parameter grant: A grant from ``acquire(_:owner:timeToLive:)`` or ``renew(_:timeToLive:)``.
  /// - Returns: `false` once the user (or everyone) signed out after the grant.
  /// - Throws: When the lease's storage cannot be read.
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool

  /// A new subscription to the lease's changes, from this process and others, from now on.
  ///
  /// - Returns: A stream that yields after each change; it ends when the subscriber stops
  ///   iterating it or the lease is deallocated.
  func changes() -> AsyncStream<LeaseChange>
}

/// A lease held: the key, its holder, and its place in the key's history.
public struct LeaseGrant: Sendable, Hashable {
  /// The key the grant is for.
  public let key: AccountKey
  /// The holder.
  public let owner: String
  /// Increases with every grant of any key of the lease: tells a grant from the one that took
  /// it over.
  public let fence: UInt64
  /// The sign-out generation at the time of the grant (see ``AuthorizationLease/isCurrent(_:)``).
  public let generation: UInt64
  /// When the grant lapses unless renewed (wall-clock time).
  public let expiresAt: Date

  /// Creates a grant (for implementations of ``AuthorizationLease``).
  ///
  /// - Parameters:
  ///   - key: The key.
  ///   - owner: The holder.
  ///   - fence: The grant's fence.
  ///   - generation: The sign-out generation.
  ///   - expiresAt: When it lapses.
  public init(key: AccountKey, owner: String, fence: UInt64, generation: UInt64, expiresAt: Date) {
    self.key = key
    self.owner = owner
    self.fence = fence
    self.generation = generation
    self.expiresAt = expiresAt
  }
}

/// What ``AuthorizationLease/acquire(_:owner:timeToLive:)`` got.
public enum LeaseAttempt: Sendable, Hashable {
  /// The caller holds the key.
  case acquired(LeaseGrant)
  /// Another holder has it until `expiresAt` (unless it renews or releases it first).
  case heldElsewhere(owner: String, expiresAt: Date)
}

/// A change announced by ``AuthorizationLease/changes()``.
public enum LeaseChange: Sendable, Hashable {
  /// A holder gave the key up; whatever it obtained is in the store.
  case released(AccountKey)
  /// The user signed out in the process of `owner`.
  case signedOut(mcUid: String, by: String)
  /// Every user signed out in the process of `owner`.
  case signedOutAll(by: String)
  /// Something changed; the implementation cannot tell what.
  case unknown
}
