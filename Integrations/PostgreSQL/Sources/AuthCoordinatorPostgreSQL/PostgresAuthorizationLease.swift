import Foundation
import TokenStore

/// An ``TokenStore/AuthorizationLease`` in PostgreSQL: one authorization per key across every
/// replica that opens the same database and schema.
///
/// **A lease row with a fence, not an advisory lock.** Each key has at most one row in
/// `leases`: its holder, a fence from a sequence, and an expiry on the **database's clock**
/// (replicas' clocks disagree; the database's is the one they share). Every requirement is one
/// statement, and none holds a row lock or a transaction open across the call to the identity
/// provider, so the lease works through PgBouncer in transaction mode:
/// - `acquire`: the schema's `acquire_lease_v3` function, one round trip: `INSERT … ON CONFLICT
///   DO UPDATE … WHERE expires_at < clock_timestamp() RETURNING fence` (a new row, or the
///   takeover of a lapsed one; otherwise the live holder), then, with a new snapshot, the
///   key's model, which the grant carries when the lease was given the store. A row that no
///   replica wrote is held to the lease's bounds: a grant expiring more than a day ahead (2999,
///   `infinity`) is taken over, a back-off ending more than an hour ahead is shortened to an
///   hour in the row, and at most 64 failures are reported.
/// - `renew`: `UPDATE … WHERE fence = $2`: extends the grant while no one took it over
///   (a lapsed grant that no one took over is extended too: no one else can have spent the
///   token in between).
/// - `release`: `DELETE … WHERE fence = $2` and `pg_notify` of the key's digest, in one
///   statement (the notification goes out when it commits). A release with a back-off
///   (``release(_:backingOff:)``) turns the row into a back-off instead: no owner, a new fence,
///   `backoff_failures` and `backoff_code` set, the account's digest in `account_hash`, and an
///   expiry at the back-off's end, after which `acquire` takes it over as it takes over a
///   lapsed grant.
/// - revocations and sign-outs: one statement moves the sign-out generation on, records it for
///   the account (or everyone), and deletes the back-offs of the account's keys (of every key),
///   so that a logout's next sign-in need not wait one out.
/// - `isCurrent`: compares the grant's sign-out generation with the account's and everyone's.
///
/// Accounts are hashed in Unicode Normalization Form C, as ``TokenStore/AccountKey`` keeps
/// them: a sign-out that names an account in another spelling ("Jose" and a combining accent)
/// ends the grants and back-offs of the same keys.
///
/// Grants' `expiresAt` are the database's remaining time added to this process's clock when
/// the call was made, so a holder never believes it holds longer than the database does.
/// ``PostgresTokenStore``'s fenced save refuses a result once a later grant of its key exists.
///
/// **Changes.** ``changes()`` starts a listener: a thread with a connection of its own that
/// `LISTEN`s on the schema's channel. A notification names a key by its digest only (never a
/// token or an account). After `LISTEN` starts, after every reconnect, and at every poll tick
/// (``PostgresConfiguration/pollInterval``, jittered) it re-reads the sign-outs and announces
/// ``TokenStore/LeaseChange/unknown``, so a waiter tries the lease again even when a
/// notification was lost (`NOTIFY` is not durable and is not delivered to a dropped listener).
/// The listener needs a session, so it must connect directly or through PgBouncer in session
/// mode; the pool's statements do not. A subscription keeps the newest 1,024 changes its
/// subscriber has not taken; a burst past that (say, the sign-outs read back after a reconnect)
/// drops the oldest and ends with a change that stands for them: ``TokenStore/LeaseChange/signedOutAll(by:)``
/// with no owner when a sign-out was dropped (every account may have signed out), else
/// ``TokenStore/LeaseChange/unknown``. No sign-out is lost silently.
public final class PostgresAuthorizationLease: AuthorizationLease, CustomStringConvertible {
  private let database: PostgresDatabase
  private let hub: ChangeHub
  private let schema: String
  private let store: PostgresTokenStore?

  /// Creates the lease.
  ///
  /// - Parameters:
  ///   - database: The database, opened once per process and shared with the store.
  ///   - store: The store the coordinator is given, to re-read the key's model in the same
  ///     round trip as every grant (``TokenStore/LeaseGrant/storeRead``), which spares the
  ///     coordinator a read of its own. Pass exactly the coordinator's store (same database
  ///     and sealing), or none.
  public init(database: PostgresDatabase, readingFrom store: PostgresTokenStore? = nil) {
    self.database = database
    self.schema = database.schema
    self.hub = ChangeHub()
    self.store = store
  }

  deinit { hub.stop() }

  public var description: String { "PostgresAuthorizationLease(schema: \(schema))" }

  public func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws -> LeaseAttempt {
    let keyText = try KeyText.key(key)
    try KeyText.checked(owner)
    let microseconds = Self.microseconds(
      timeToLive, atMost: PostgresSchema.maximumTimeToLiveSeconds)
    for _ in 0..<3 {
      let asked = Date()
      let rows = try await database.execute(
        "SELECT * FROM \(schema).acquire_lease_v3($1, $2, $3::bigint)",
        [.text(keyText), .text(owner), .text(String(microseconds))])
      // The key's lease was released between the function's two statements: try again.
      guard let row = rows.first else { continue }
      guard row.count == 9, let acquired = row[0], let reported = row[2].flatMap(Double.init),
        reported.isFinite, let holder = row[3], let digest = row[5]
      else { throw PostgresError(.badReply, "the lease row could not be read") }
      hub.remember(key, digest: digest)
      // The function keeps it within the bounds; so does this, whatever the row said.
      let remaining = min(max(reported, 0), Double(PostgresSchema.maximumTimeToLiveSeconds))
      if acquired == "t" {
        guard let fence = row[1].flatMap(UInt64.init), let generation = row[4].flatMap(UInt64.init)
        else { throw PostgresError(.badReply, "the grant could not be read") }
        return .acquired(
          LeaseGrant(
            key: key, owner: owner, fence: fence, generation: generation,
            expiresAt: asked.addingTimeInterval(remaining),
            storeRead: storeRead(row[6], for: key)))
      }
      let until = Date().addingTimeInterval(remaining)
      if let failures = row[7] {
        guard let failures = Int(failures) else {
          throw PostgresError(.badReply, "the lease row's back-off could not be read")
        }
        // Without a code it is no back-off the package wrote (the function takes such a row
        // over): a holder with no owner, waited for within the bounds.
        guard let code = row[8], !code.isEmpty else {
          return .heldElsewhere(owner: holder, expiresAt: until)
        }
        return .backingOff(
          until: min(
            until, Date().addingTimeInterval(Double(PostgresSchema.maximumBackOffSeconds))),
          failures: min(max(failures, 0), PostgresSchema.maximumFailures), code: code)
      }
      return .heldElsewhere(owner: holder, expiresAt: until)
    }
    throw PostgresError(.badReply, "the lease of the key changed under three attempts in a row")
  }

  public func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    let microseconds = Self.microseconds(
      timeToLive, atMost: PostgresSchema.maximumTimeToLiveSeconds)
    let asked = Date()
    let rows = try await database.execute(
      """
      UPDATE \(schema).leases
      SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
      WHERE key_hash = sha256(convert_to($1, 'UTF8')) AND fence = $2::bigint
      RETURNING extract(epoch FROM expires_at - clock_timestamp())
      """,
      [.text(try KeyText.key(grant.key)), .text(String(grant.fence)), .text(String(microseconds))])
    guard let row = rows.first else { return nil }
    guard let remaining = row[0].flatMap(Double.init), remaining.isFinite else {
      throw PostgresError(.badReply, "the renewed expiry could not be read")
    }
    return LeaseGrant(
      key: grant.key, owner: grant.owner, fence: grant.fence, generation: grant.generation,
      expiresAt: asked.addingTimeInterval(remaining))
  }

  public func release(_ grant: LeaseGrant) async throws {
    _ = try await database.execute(
      """
      WITH released AS (
        DELETE FROM \(schema).leases
        WHERE key_hash = sha256(convert_to($1, 'UTF8')) AND fence = $2::bigint
        RETURNING key_hash)
      SELECT pg_notify($3, 'r:' || encode(key_hash, 'hex')) FROM released
      """,
      [
        .text(try KeyText.key(grant.key)), .text(String(grant.fence)),
        .text(PostgresSchema.channel(schema)),
      ])
  }

  /// Gives the key up and keeps every replica off it for `backOff.duration` on the database's
  /// clock (at most an hour, as long as the longest `Retry-After` an authorizer honours), or
  /// until a revocation or sign-out of its account (or of everyone): the row becomes a back-off
  /// (no owner, a fence of its own, `backoff_failures`, at most 64, `backoff_code` and the
  /// account's digest set), and the release is notified in the same statement. A back-off
  /// without a code is a plain ``release(_:)``.
  public func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws {
    try KeyText.checked(backOff.code)
    guard !backOff.code.isEmpty else { return try await release(grant) }
    let microseconds = Self.microseconds(
      backOff.duration, atMost: PostgresSchema.maximumBackOffSeconds)
    _ = try await database.execute(
      """
      WITH backing_off AS (
        UPDATE \(schema).leases
        SET owner = '', fence = nextval('\(schema).fences'),
          expires_at = clock_timestamp() + $4::bigint * interval '1 microsecond',
          backoff_failures = $5::integer, backoff_code = $6,
          account_hash = sha256(convert_to($7, 'UTF8'))
        WHERE key_hash = sha256(convert_to($1, 'UTF8')) AND fence = $2::bigint
          AND backoff_failures IS NULL
        RETURNING key_hash)
      SELECT pg_notify($3, 'r:' || encode(key_hash, 'hex')) FROM backing_off
      """,
      [
        .text(try KeyText.key(grant.key)), .text(String(grant.fence)),
        .text(PostgresSchema.channel(schema)), .text(String(microseconds)),
        .text(String(min(max(backOff.failures, 0), PostgresSchema.maximumFailures))),
        .text(backOff.code), .text(grant.key.account),
      ])
  }

  /// The grant's re-read of the key's model: none without a store, and none when the model
  /// cannot be opened now (the coordinator's own read then fails with the store's error,
  /// instead of the grant saying the key has no model).
  private func storeRead(_ column: String?, for key: AccountKey) -> LeaseGrant.StoreRead {
    guard let store else { return .notRead }
    do {
      return .read(try store.decode(column, for: key))
    } catch {
      return .notRead
    }
  }

  /// `duration` in whole microseconds, rounded up, within `1...seconds` seconds.
  private static func microseconds(_ duration: Duration, atMost seconds: Int) -> Int64 {
    min(max(duration, .zero), .seconds(seconds)).roundedUpMicroseconds
  }

  public func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    try KeyText.checked(grant.key.account)
    let rows = try await database.execute(
      """
      SELECT coalesce(max(generation), 0) FROM \(schema).sign_outs
      WHERE account_hash IN (sha256(convert_to($1, 'UTF8')), '\\x00'::bytea)
      """, [.text(grant.key.account)])
    guard let latest = rows.first?[0].flatMap(UInt64.init) else {
      throw PostgresError(.badReply, "the sign-out generation could not be read")
    }
    return latest <= grant.generation
  }

  public func revokeGrants(ofAccount account: String) async throws {
    try await recordSignOut(account: account, by: "", announced: false)
  }

  public func revokeAllGrants() async throws {
    try await recordSignOut(account: nil, by: "", announced: false)
  }

  public func signOut(account: String, by owner: String) async throws {
    try await recordSignOut(account: account, by: owner, announced: true)
  }

  public func signOutAll(by owner: String) async throws {
    try await recordSignOut(account: nil, by: owner, announced: true)
  }

  /// Moves the generation on, records it for `account` (`nil`: everyone) and deletes the
  /// back-offs of its keys (of every key), in one statement, so that the account's next
  /// sign-in need not wait one out; an announced sign-out notifies in the same one. The
  /// counter's row lock orders sign-outs, so their generations commit in order. Live grants
  /// stay their holders' (they are no longer current).
  ///
  /// The account is hashed and recorded in Normalization Form C, as keys are
  /// (``TokenStore/AccountKey/normalized(_:)``): one account in two Unicode spellings is one.
  private func recordSignOut(account: String?, by owner: String, announced: Bool) async throws {
    let account = account.map(AccountKey.normalized)
    if let account { try KeyText.checked(account) }
    try KeyText.checked(owner)
    let digest = account == nil ? "'\\x00'::bytea" : "sha256(convert_to($1, 'UTF8'))"
    let backOffsOfAccount = account == nil ? "" : "AND lease.account_hash = \(digest)"
    let notify =
      announced ? ", pg_notify($4, 's:' || generation::text)" : ", $4::text IS NULL"
    _ = try await database.execute(
      """
      WITH generation AS (
        UPDATE \(schema).counters SET value = value + 1 WHERE name = 'generation'
        RETURNING value),
      issued AS (
        SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS fence
        FROM \(schema).fences),
      recorded AS (
        INSERT INTO \(schema).sign_outs AS sign_out
          (account_hash, account, owner, generation, announced, fence_through)
        SELECT \(digest), $1::text, $2, value, $3::boolean,
          CASE WHEN $3::boolean THEN NULL ELSE fence END
        FROM generation, issued
        ON CONFLICT (account_hash) DO UPDATE
          SET owner = EXCLUDED.owner, generation = EXCLUDED.generation,
            announced = EXCLUDED.announced,
            fence_through = greatest(sign_out.fence_through, EXCLUDED.fence_through)
        RETURNING generation),
      back_offs_ended AS (
        DELETE FROM \(schema).leases AS lease
        WHERE lease.backoff_failures IS NOT NULL \(backOffsOfAccount))
      SELECT generation\(notify) FROM recorded
      """,
      [
        account.map { .text($0) } ?? .null, .text(owner), .text(announced ? "true" : "false"),
        .text(PostgresSchema.channel(schema)),
      ])
  }

  public func changes() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream(
      bufferingPolicy: .bufferingNewest(ChangeHub.bufferSize))
    hub.subscribe(continuation) {
      ChangeListener.start(
        hub: hub, configuration: database.configuration.forListener, redactor: database.redactor)
    }
    return stream
  }
}
