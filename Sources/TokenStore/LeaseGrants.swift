import Foundation

/// The grant of an ``AuthorizationLease``: who may authorize a key now.
///
/// What every implementation promises:
/// - **One holder per key.** ``acquire(_:owner:timeToLive:)`` grants a key to at most one
///   caller at a time. A grant whose `expiresAt` passed (its holder died or stopped renewing)
///   may be taken over.
/// - **Fences grow.** Every grant's ``LeaseGrant/fence`` is larger than every earlier grant's
///   of any key of the lease, so a store can tell a deposed holder's save from its successor's
///   (``FencedTokenStore``).
/// - **Renewal tells the truth.** ``renew(_:timeToLive:)`` extends only a grant that is still
///   the key's current one and returns `nil` once it was released or taken over (it may refuse a lapsed one too); a throw means
///   "unknown" and the holder retries until its grant would lapse.
/// - **Release is idempotent** and announces the release (``LeaseChangeFeed``).
/// - **Current means not signed out.** ``isCurrent(_:)`` is `false` once the grant's account
///   (or everyone) signed out after the grant was taken (``SignOutGenerations``).
///
/// In a database each requirement is one statement: `acquire` an `INSERT ... ON CONFLICT DO
/// UPDATE ... WHERE expires_at < now()` that returns the row; `renew` an `UPDATE ... WHERE fence
/// = $1 AND expires_at >= now()`; `release` a `DELETE ... WHERE fence = $1`; `isCurrent` a
/// comparison of the grant's generation with the account's sign-out generation.
public protocol LeaseGrants: Sendable {
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

  /// Whether no sign-out of the grant's account happened since the grant was taken.
  ///
  /// - Parameter grant: A grant from ``acquire(_:owner:timeToLive:)`` or ``renew(_:timeToLive:)``.
  /// - Returns: `false` once the account (or everyone) signed out after the grant.
  /// - Throws: When the lease's storage cannot be read.
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool
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
  /// The sign-out generation at the time of the grant (see ``LeaseGrants/isCurrent(_:)``).
  public let generation: UInt64
  /// When the grant lapses unless renewed (wall-clock time).
  public let expiresAt: Date
  /// The key's stored model, read by the lease in the same step that made the grant, after
  /// every save that held the key before it; ``StoreRead/notRead`` for leases that keep no
  /// models (most), and in grants from ``LeaseGrants/renew(_:timeToLive:)``.
  ///
  /// When it is ``StoreRead/read(_:)``, the coordinator takes it as its re-read of the store
  /// before authorizing and skips the read of its own. A lease may only fill it in when it
  /// reads from the very store the coordinator is given.
  public let storeRead: StoreRead

  /// What a lease read of the key's stored model while granting it.
  public enum StoreRead: Sendable, Hashable {
    /// The lease did not read the store.
    case notRead
    /// The stored model (`nil`: none, or one that could not be read).
    case read(AuthModel?)
  }

  /// Creates a grant (for implementations of ``LeaseGrants``).
  ///
  /// - Parameters:
  ///   - key: The key.
  ///   - owner: The holder.
  ///   - fence: The grant's fence.
  ///   - generation: The sign-out generation.
  ///   - expiresAt: When it lapses.
  ///   - storeRead: The stored model read while granting, if the lease reads the store.
  public init(
    key: AccountKey, owner: String, fence: UInt64, generation: UInt64, expiresAt: Date,
    storeRead: StoreRead = .notRead
  ) {
    self.key = key
    self.owner = owner
    self.fence = fence
    self.generation = generation
    self.expiresAt = expiresAt
    self.storeRead = storeRead
  }
}

/// What ``LeaseGrants/acquire(_:owner:timeToLive:)`` got.
public enum LeaseAttempt: Sendable, Hashable {
  /// The caller holds the key.
  case acquired(LeaseGrant)
  /// Another holder has it until `expiresAt` (unless it renews or releases it first).
  case heldElsewhere(owner: String, expiresAt: Date)
}
