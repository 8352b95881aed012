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
/// - **A back-off keeps everyone off.** After ``release(_:backingOff:)``, ``acquire(_:owner:timeToLive:)``
///   answers ``LeaseAttempt/backingOff(until:failures:code:)`` to every owner until the
///   back-off's expiry (on the lease's clock), then grants as usual.
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

  /// Gives the key up after its holder's authorization failed, and keeps anyone from taking it
  /// until the holder's back-off ends: until then, ``acquire(_:owner:timeToLive:)`` answers
  /// ``LeaseAttempt/backingOff(until:failures:code:)`` to every owner. That is what bounds a
  /// fleet's requests to a failing server to one per back-off step, however many replicas
  /// share the lease. Announces ``LeaseChange/released(_:)``, so waiters hear of the failure
  /// at once. Does nothing when the grant is no longer held.
  ///
  /// The default implementation releases the grant without the back-off (each replica then
  /// backs off on its own); the package's leases implement it. The back-off is a record like
  /// a grant, with an expiry on the lease's clock and a fence of its own: a lease may store it
  /// as a holder that no caller owns.
  ///
  /// - Parameters:
  ///   - grant: The grant to release.
  ///   - backOff: How long no one may take the key, counted from the release, and what the
  ///     next holder needs to know of the failure.
  /// - Throws: When the lease's storage cannot be read or changed.
  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws

  /// Whether no sign-out of the grant's account happened since the grant was taken.
  ///
  /// - Parameter grant: A grant from ``acquire(_:owner:timeToLive:)`` or ``renew(_:timeToLive:)``.
  /// - Returns: `false` once the account (or everyone) signed out after the grant.
  /// - Throws: When the lease's storage cannot be read.
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool
}

extension LeaseGrants {
  /// Releases the grant without recording the back-off: a lease that does not implement
  /// back-offs lets each replica back off on its own.
  ///
  /// - Parameters:
  ///   - grant: The grant to release.
  ///   - backOff: Ignored.
  /// - Throws: What ``release(_:)`` throws.
  public func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws {
    try await release(grant)
  }
}

/// What a holder whose authorization failed asks its lease to remember for the key
/// (``LeaseGrants/release(_:backingOff:)``), so that no replica tries again before the back-off
/// ends.
public struct LeaseBackOff: Sendable, Hashable {
  /// How long no one may take the key, counted from the release on the lease's clock.
  public var duration: Duration
  /// The key's consecutive transient failures so far (0 for a failure that is not transient):
  /// the next holder's back-off grows from there instead of starting over.
  public var failures: Int
  /// The failure's error code (`network_error`, `invalid_client`): what a replica's callers
  /// are told while the back-off lasts. Never a token or a message.
  public var code: String

  /// The most failures a lease records or reports: 64. A count read from a lease's storage
  /// (a file, a row another version wrote) is clamped to it, so that the back-off a process
  /// computes from it can never overflow.
  public static let maximumFailures = 64
  /// The longest back-off a lease records or reports: one hour, the longest `Retry-After`
  /// the package honours. A longer one read from a lease's storage ends an hour from the read
  /// (on the lease's clock).
  public static let maximumDuration: Duration = .seconds(3600)

  /// The back-off a lease records: `failures` within `0...maximumFailures`, `duration` within
  /// `0...maximumDuration`.
  package var clamped: LeaseBackOff {
    LeaseBackOff(
      duration: min(max(duration, .zero), Self.maximumDuration),
      failures: min(max(failures, 0), Self.maximumFailures), code: code)
  }

  /// Creates a back-off.
  ///
  /// - Parameters:
  ///   - duration: How long no one may take the key.
  ///   - failures: The consecutive transient failures so far.
  ///   - code: The failure's error code.
  public init(duration: Duration, failures: Int, code: String) {
    self.duration = duration
    self.failures = failures
    self.code = code
  }
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
  /// No one holds the key, but its last holder's authorization failed and it asked the lease
  /// to keep everyone off until `until` (``LeaseGrants/release(_:backingOff:)``): the caller
  /// should not authorize before then. `failures` and `code` are the back-off's.
  case backingOff(until: Date, failures: Int, code: String)
}
