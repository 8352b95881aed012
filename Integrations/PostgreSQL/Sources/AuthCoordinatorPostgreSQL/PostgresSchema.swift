/// The package's tables, in a schema of their own, with a version the package migrates.
///
/// Keys, accounts and owners are stored as text; rows are found by the SHA-256 digest of the
/// key (or of the account), so a key of any length is indexed and compared in constant size.
/// The digest input is `<UTF-8 length of the account>:<account>/<mode>`, which no two keys
/// share.
enum PostgresSchema {
  /// The version this package writes and reads.
  static let version = 7

  /// The longest a grant lasts (a longer time to live is shortened to it): a day.
  static let maximumTimeToLiveSeconds = 86_400
  /// The longest back-off a lease row records: an hour, as long as the longest `Retry-After`
  /// an authorizer honours.
  static let maximumBackOffSeconds = 3_600
  /// The most consecutive failures a back-off records or reports.
  static let maximumFailures = 64

  /// Creates version 1 in `schema` (an identifier validated by the configuration).
  static func version1(_ schema: String) -> String {
    """
    CREATE TABLE \(schema).models (
      key_hash bytea PRIMARY KEY,
      account_hash bytea NOT NULL,
      account text NOT NULL,
      mode text NOT NULL,
      model bytea NOT NULL,
      fence bigint,
      updated_at timestamptz NOT NULL DEFAULT now());
    CREATE INDEX models_by_account ON \(schema).models (account_hash);
    CREATE TABLE \(schema).leases (
      key_hash bytea PRIMARY KEY,
      owner text NOT NULL,
      fence bigint NOT NULL,
      expires_at timestamptz NOT NULL);
    CREATE SEQUENCE \(schema).fences;
    CREATE TABLE \(schema).counters (name text PRIMARY KEY, value bigint NOT NULL);
    INSERT INTO \(schema).counters VALUES ('generation', 0);
    CREATE TABLE \(schema).sign_outs (
      account_hash bytea PRIMARY KEY,
      account text,
      owner text NOT NULL,
      generation bigint NOT NULL,
      announced boolean NOT NULL);
    CREATE INDEX sign_outs_by_generation ON \(schema).sign_outs (generation);
    """
  }

  /// Version 2 adds `acquire_lease`: the lease's acquire and its re-read of the key's model in
  /// one round trip. It is a function because the re-read must see every save that held the
  /// lease row before the grant: a `VOLATILE` function's statements each take a new snapshot,
  /// where one statement would read the model from a snapshot taken before it waited for
  /// that row. It reads the sign-out generation first, so a sign-out that lands during the
  /// call counts as after the grant. No session state: it works through PgBouncer in
  /// transaction mode.
  static func version2(_ schema: String) -> String {
    """
    CREATE OR REPLACE FUNCTION \(schema).acquire_lease(p_key text, p_owner text, p_ttl_us bigint)
    RETURNS TABLE (
      r_acquired boolean, r_fence bigint, r_remaining double precision, r_owner text,
      r_generation bigint, r_digest text, r_model bytea)
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
    AS $acquire$
    DECLARE
      h bytea := sha256(convert_to(p_key, 'UTF8'));
      expiry timestamptz;
    BEGIN
      SELECT c.value INTO r_generation FROM \(schema).counters c WHERE c.name = 'generation';
      INSERT INTO \(schema).leases AS lease (key_hash, owner, fence, expires_at)
      VALUES (
        h, p_owner, nextval('\(schema).fences'),
        clock_timestamp() + p_ttl_us * interval '1 microsecond')
      ON CONFLICT (key_hash) DO UPDATE
        SET owner = EXCLUDED.owner, fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at
        WHERE lease.expires_at < clock_timestamp()
      RETURNING lease.fence, lease.expires_at INTO r_fence, expiry;
      IF FOUND THEN
        r_acquired := true;
        r_owner := p_owner;
        SELECT m.model INTO r_model FROM \(schema).models m WHERE m.key_hash = h;
      ELSE
        SELECT l.fence, l.expires_at, l.owner INTO r_fence, expiry, r_owner
        FROM \(schema).leases l WHERE l.key_hash = h;
        -- Released in between: no row, and the caller tries again.
        IF NOT FOUND THEN RETURN; END IF;
        r_acquired := false;
        r_generation := 0;
      END IF;
      r_remaining := extract(epoch FROM expiry - clock_timestamp());
      r_digest := encode(h, 'hex');
      RETURN NEXT;
    END
    $acquire$;
    """
  }

  /// Version 3 adds back-offs (``TokenStore/LeaseGrants/release(_:backingOff:)``): a lease
  /// row whose `backoff_failures` is set is a back-off, no one's grant, until its
  /// `expires_at`. `acquire_lease_v3` reports it; `acquire_lease` (version 2's, which replicas
  /// of the previous version still call during a rolling upgrade) clears it when it takes the
  /// row over, and reports a live one as a holder with no owner, which those replicas wait for.
  static func version3(_ schema: String) -> String {
    """
    ALTER TABLE \(schema).leases
      ADD COLUMN IF NOT EXISTS backoff_failures integer,
      ADD COLUMN IF NOT EXISTS backoff_code text;
    \(acquireLease(schema, name: "acquire_lease", reportsBackOff: false));
    \(acquireLease(schema, name: "acquire_lease_v3", reportsBackOff: true));
    """
  }

  /// Version 4 replaces both acquire functions with ones that hold every row to the lease's
  /// bounds on the database's clock: a grant further ahead than ``maximumTimeToLiveSeconds``
  /// (2999, `infinity`: no replica wrote it) is taken over as a lapsed one is; a back-off
  /// further ahead than ``maximumBackOffSeconds`` is shortened to it in the row, so that it
  /// lapses on time; a back-off without an error code is taken over; the failure count
  /// reported is within `0...`\(maximumFailures). Without them such a row kept its key from
  /// every replica for good. The tables are unchanged.
  static func version4(_ schema: String) -> String {
    """
    \(acquireLease(schema, name: "acquire_lease", reportsBackOff: false));
    \(acquireLease(schema, name: "acquire_lease_v3", reportsBackOff: true));
    """
  }

  /// Version 5 records the account of a back-off: a release with a back-off sets the row's
  /// `account_hash` (the account's digest, as in `models`), so that a revocation or sign-out of
  /// the account deletes its keys' back-offs in the statement that records it; without it a
  /// logout left them in place, and no replica authorized the account until they ran out (up
  /// to an hour). The functions are unchanged. A back-off that a replica of the previous
  /// version writes during a rolling upgrade has no `account_hash`: a sign-out of everyone
  /// ends it, a sign-out of its account does not, and it lapses on its own.
  static func version5(_ schema: String) -> String {
    """
    ALTER TABLE \(schema).leases ADD COLUMN IF NOT EXISTS account_hash bytea;
    CREATE INDEX IF NOT EXISTS leases_back_offs_by_account ON \(schema).leases (account_hash)
      WHERE backoff_failures IS NOT NULL;
    """
  }

  /// Version 6 records with each revocation the fences it voided: `sign_outs.fence_through`,
  /// the largest fence issued when a revocation (``TokenStore/SignOutGenerations/revokeGrants(ofAccount:)``)
  /// recorded it; an announcement leaves it. ``PostgresTokenStore``'s fenced save refuses a
  /// fence at or below its account's mark (or everyone's) in the same statement, so a holder
  /// whose result arrives after a logout, under a grant taken before it, stores nothing. A
  /// replica of the previous version during a rolling upgrade neither sets nor checks it: its
  /// late save lands, and its check after the write undoes it, as before.
  static func version6(_ schema: String) -> String {
    """
    ALTER TABLE \(schema).sign_outs ADD COLUMN IF NOT EXISTS fence_through bigint;
    """
  }

  /// Version 7 adds `save_fenced`: the fenced save as a function, so that its check of the
  /// revocation mark reads a snapshot taken after its waits. One statement read `sign_outs`
  /// in the snapshot it began with; a save that then waited on the lease row (behind its own
  /// holder's renewal, say) or on the model row (behind a logout's removal) across a whole
  /// logout missed the revocation's mark and landed the signed-out session, until the check
  /// after the write undid it. In the function the waits come first, each in a statement of
  /// its own: the lease row share-locked (a takeover is waited for, or waits for the save),
  /// then the key's model row locked (a removal in progress is waited for); the write, with
  /// the mark's check, is a new statement with a new snapshot (a `VOLATILE` function's
  /// statements each take one). The tables are unchanged, and a replica of the previous
  /// version saves with its one statement, as before.
  static func version7(_ schema: String) -> String {
    """
    CREATE OR REPLACE FUNCTION \(schema).save_fenced(
      p_key text, p_account text, p_mode text, p_model bytea, p_fence bigint)
    RETURNS boolean
    LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
    AS $save$
    DECLARE
      h bytea := sha256(convert_to(p_key, 'UTF8'));
      a bytea := sha256(convert_to(p_account, 'UTF8'));
      granted bigint;
    BEGIN
      SELECT l.fence INTO granted FROM \(schema).leases l WHERE l.key_hash = h FOR SHARE;
      -- A later grant of the key exists: this holder was deposed.
      IF granted > p_fence THEN RETURN false; END IF;
      PERFORM 1 FROM \(schema).models m WHERE m.key_hash = h FOR UPDATE;
      INSERT INTO \(schema).models AS m (key_hash, account_hash, account, mode, model, fence)
      SELECT h, a, p_account, p_mode, p_model, p_fence
      WHERE NOT EXISTS (
        SELECT 1 FROM \(schema).sign_outs s
        WHERE s.account_hash IN (a, '\\x00'::bytea) AND s.fence_through >= p_fence)
      ON CONFLICT (key_hash) DO UPDATE
        SET model = EXCLUDED.model, fence = EXCLUDED.fence, updated_at = now()
        WHERE m.fence IS NULL OR m.fence <= EXCLUDED.fence;
      RETURN FOUND;
    END
    $save$
    """
  }

  /// The lease's acquire and its re-read of the key's model in one round trip (see
  /// ``version2(_:)``), clearing a lapsed back-off when it takes the row over and holding every
  /// row to the lease's bounds (see ``version4(_:)``); with `reportsBackOff`, a live back-off's
  /// failures and code are two more columns.
  private static func acquireLease(
    _ schema: String, name: String, reportsBackOff: Bool
  ) -> String {
    let backOffColumns = reportsBackOff ? ", r_backoff_failures integer, r_backoff_code text" : ""
    let backOffRead =
      reportsBackOff
      ? ", least(greatest(l.backoff_failures, 0), \(maximumFailures)), l.backoff_code" : ""
    let backOffInto = reportsBackOff ? ", r_backoff_failures, r_backoff_code" : ""
    return """
      CREATE OR REPLACE FUNCTION \(schema).\(name)(p_key text, p_owner text, p_ttl_us bigint)
      RETURNS TABLE (
        r_acquired boolean, r_fence bigint, r_remaining double precision, r_owner text,
        r_generation bigint, r_digest text, r_model bytea\(backOffColumns))
      LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp
      AS $acquire$
      DECLARE
        h bytea := sha256(convert_to(p_key, 'UTF8'));
        expiry timestamptz;
        -- No grant lasts longer, and no back-off: a row further ahead was not written so.
        max_hold interval := interval '\(maximumTimeToLiveSeconds) seconds';
        max_backoff interval := interval '\(maximumBackOffSeconds) seconds';
      BEGIN
        SELECT c.value INTO r_generation FROM \(schema).counters c WHERE c.name = 'generation';
        -- A back-off further ahead than the longest is shortened to it, in the row: it then
        -- lapses on time instead of an hour after every look.
        UPDATE \(schema).leases l SET expires_at = clock_timestamp() + max_backoff
        WHERE l.key_hash = h AND l.backoff_failures IS NOT NULL
          AND l.expires_at > clock_timestamp() + max_backoff;
        INSERT INTO \(schema).leases AS lease (key_hash, owner, fence, expires_at)
        VALUES (
          h, p_owner, nextval('\(schema).fences'),
          clock_timestamp() + p_ttl_us * interval '1 microsecond')
        ON CONFLICT (key_hash) DO UPDATE
          SET owner = EXCLUDED.owner, fence = EXCLUDED.fence, expires_at = EXCLUDED.expires_at,
            backoff_failures = NULL, backoff_code = NULL
          WHERE lease.expires_at < clock_timestamp()
            -- A grant no replica made (2999, infinity) is taken over as a lapsed one is.
            OR (lease.backoff_failures IS NULL AND lease.expires_at > clock_timestamp() + max_hold)
            -- So is a back-off without the error code every back-off records.
            OR (lease.backoff_failures IS NOT NULL AND coalesce(lease.backoff_code, '') = '')
        RETURNING lease.fence, lease.expires_at INTO r_fence, expiry;
        IF FOUND THEN
          r_acquired := true;
          r_owner := p_owner;
          SELECT m.model INTO r_model FROM \(schema).models m WHERE m.key_hash = h;
        ELSE
          SELECT l.fence, l.expires_at, l.owner\(backOffRead)
          INTO r_fence, expiry, r_owner\(backOffInto)
          FROM \(schema).leases l WHERE l.key_hash = h;
          -- Released in between: no row, and the caller tries again.
          IF NOT FOUND THEN RETURN; END IF;
          r_acquired := false;
          r_generation := 0;
        END IF;
        -- Within 0...max_hold whatever the row says (an infinite one cannot be subtracted).
        r_remaining := extract(epoch FROM
          least(greatest(expiry, clock_timestamp()), clock_timestamp() + max_hold)
          - clock_timestamp());
        r_digest := encode(h, 'hex');
        RETURN NEXT;
      END
      $acquire$
      """
  }

  /// The `NOTIFY` channel of `schema`'s lease.
  static func channel(_ schema: String) -> String { "\(schema)_changes" }

  /// Creates or migrates the schema, serialised across replicas by a transaction-scoped
  /// advisory lock (which works through PgBouncer in transaction mode too).
  static func migrate(
    _ schema: String, on connection: PostgresConnection, until deadline: ContinuousClock.Instant
  ) throws {
    _ = try connection.execute("BEGIN", until: deadline)
    do {
      _ = try connection.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))", [.text("authcoordinator.migrate.\(schema)")],
        until: deadline)
      try connection.executeScript(
        """
        CREATE SCHEMA IF NOT EXISTS \(schema);
        CREATE TABLE IF NOT EXISTS \(schema).schema_version (version integer NOT NULL);
        """, until: deadline)
      let found = try connection.execute(
        "SELECT max(version) FROM \(schema).schema_version", until: deadline)
      let current = found.first?[0].flatMap { Int($0) } ?? 0
      guard current <= version else {
        throw PostgresError(
          .unsupportedSchema,
          "schema \(schema) is at version \(current); this package knows versions up to \(version)")
      }
      if current < 1 {
        try connection.executeScript(version1(schema), until: deadline)
      }
      if current < 2 {
        try connection.executeScript(version2(schema), until: deadline)
      }
      if current < 3 {
        try connection.executeScript(version3(schema), until: deadline)
      }
      if current < 4 {
        try connection.executeScript(version4(schema), until: deadline)
      }
      if current < 5 {
        try connection.executeScript(version5(schema), until: deadline)
      }
      if current < 6 {
        try connection.executeScript(version6(schema), until: deadline)
      }
      if current < 7 {
        try connection.executeScript(version7(schema), until: deadline)
      }
      if current < version {
        _ = try connection.execute(
          "INSERT INTO \(schema).schema_version VALUES (\(version))", until: deadline)
      }
      _ = try connection.execute("COMMIT", until: deadline)
    } catch {
      if !connection.isBroken { _ = try? connection.execute("ROLLBACK", until: deadline) }
      throw error
    }
  }
}
