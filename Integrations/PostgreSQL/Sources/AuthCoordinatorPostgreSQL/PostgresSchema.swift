/// The package's tables, in a schema of their own, with a version the package migrates.
///
/// Keys, accounts and owners are stored as text; rows are found by the SHA-256 digest of the
/// key (or of the account), so a key of any length is indexed and compared in constant size.
/// The digest input is `<UTF-8 length of the account>:<account>/<mode>`, which no two keys
/// share.
enum PostgresSchema {
  /// The version this package writes and reads.
  static let version = 1

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
        _ = try connection.execute(
          "INSERT INTO \(schema).schema_version VALUES (1)", until: deadline)
      }
      _ = try connection.execute("COMMIT", until: deadline)
    } catch {
      if !connection.isBroken { _ = try? connection.execute("ROLLBACK", until: deadline) }
      throw error
    }
  }
}
