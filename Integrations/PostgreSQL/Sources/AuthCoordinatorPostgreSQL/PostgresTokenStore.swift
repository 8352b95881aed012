import Foundation
import TokenStore

/// A ``TokenStore/FencedTokenStore`` in PostgreSQL, shared by every replica that opens the same
/// database and schema.
///
/// - Every statement is parameterised; keys, accounts and models are never part of SQL text.
/// - A fenced save (the coordinator's, while it holds a ``PostgresAuthorizationLease`` grant) is
///   one conditional statement: it lands only if no later grant of the key exists and no save
///   with a later fence landed, and its fence is above the account's revoked fence (schema
///   version 6: a grant taken before a logout's revocation stores nothing); zero rows written
///   means the grant was lost, and the result is not stored.
/// - Removing every model of an account is one statement.
/// - Accounts are stored and matched in Unicode Normalization Form C, as
///   ``TokenStore/AccountKey`` keeps them: one account in two spellings is one row.
/// - A row that can never be opened (``ModelSealing/open(_:for:)`` threw
///   ``PostgresError/Code-swift.struct/corruptRow``) or decoded reads as empty, is reported to
///   `onIssue` as ``PostgresError/Code-swift.struct/corruptRow``, and is left in place for
///   inspection until the next save or removal replaces it; it never crashes.
/// - A row that cannot be opened now (`open` threw an error of its own: a key service that is
///   down) fails the read with ``PostgresError/Code-swift.struct/unsealingFailed``: it is not
///   read as empty, so nothing is authorized as if the key had no model.
public final class PostgresTokenStore: FencedTokenStore, CustomStringConvertible {
  private let database: PostgresDatabase
  private let sealing: (any ModelSealing)?
  private let onIssue: (@Sendable (PostgresError) -> Void)?
  private let table: String

  /// Creates the store.
  ///
  /// - Parameters:
  ///   - database: The database, opened once per process.
  ///   - sealing: Encrypts models at rest; without it, tokens are stored as JSON (see
  ///     ``ModelSealing`` for what a database reader sees).
  ///   - onIssue: Told about rows that read as empty because they can never be opened.
  public init(
    database: PostgresDatabase, sealing: (any ModelSealing)? = nil,
    onIssue: (@Sendable (PostgresError) -> Void)? = nil
  ) {
    self.database = database
    self.sealing = sealing
    self.onIssue = onIssue
    self.table = "\(database.schema).models"
  }

  public var description: String {
    "PostgresTokenStore(schema: \(database.schema), sealed: \(sealing != nil))"
  }

  public func model(for key: AccountKey) async throws -> AuthModel? {
    let rows = try await database.execute(
      "SELECT model FROM \(table) WHERE key_hash = sha256(convert_to($1, 'UTF8'))",
      [.text(try KeyText.key(key))])
    guard let row = rows.first else { return nil }
    return try decode(row[0], for: key)
  }

  /// The model in a `model` column's text (`bytea` in hex), opened and decoded; a row that can
  /// never be is reported and reads as `nil`.
  ///
  /// - Throws: ``PostgresError/Code-swift.struct/unsealingFailed`` when the sealing's `open`
  ///   failed with an error of its own: a failure of the moment (a key service that is down),
  ///   which must not read as an empty row.
  func decode(_ column: String?, for key: AccountKey) throws -> AuthModel? {
    guard let text = column, let stored = KeyText.bytes(fromHex: text) else {
      report(key, "the model column is not bytea")
      return nil
    }
    let plaintext: Data
    do {
      plaintext = try sealing.map { try $0.open(stored, for: key) } ?? stored
    } catch let error as PostgresError where error.code == .corruptRow {
      report(key, "the model could not be opened (\(error.message))")
      return nil
    } catch {
      throw PostgresError(
        .unsealingFailed,
        "the model of key \(key) could not be opened now (\(type(of: error))); it is left as it is")
    }
    do {
      return try JSONDecoder().decode(AuthModel.self, from: plaintext)
    } catch {
      report(key, "the model is not a valid encoded AuthModel")
      return nil
    }
  }

  public func save(_ model: AuthModel, for key: AccountKey) async throws {
    _ = try await database.execute(
      """
      INSERT INTO \(table) (key_hash, account_hash, account, mode, model)
      VALUES (sha256(convert_to($1, 'UTF8')), sha256(convert_to($2, 'UTF8')), $2, $3, $4)
      ON CONFLICT (key_hash) DO UPDATE SET model = EXCLUDED.model, updated_at = now()
      """, try parameters(model, key))
  }

  public func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    // One round trip to `save_fenced` (schema version 7), whose statements each take a new
    // snapshot: the lease row is share-locked first (a takeover that commits meanwhile is
    // either waited for, and its newer fence refuses the save, or made to wait until the save
    // commits, and the new holder's re-read sees it), then the model row (a logout's removal
    // in progress is waited for), and only then are the fences and the revocation mark read
    // and the model written. One statement read the mark in a snapshot older than those
    // waits, and a save stalled across a whole logout landed the signed-out session.
    let rows = try await database.execute(
      "SELECT \(database.schema).save_fenced($1, $2, $3, $4, $5::bigint)",
      try parameters(model, key) + [.text(String(fence))])
    return rows.first?[0] == "t"
  }

  /// Removes every model of `account`, in one statement. The account is matched in
  /// Normalization Form C, as keys are stored (``TokenStore/AccountKey/normalized(_:)``), so
  /// either Unicode spelling of it names the same rows.
  ///
  /// - Parameter account: The account, in any normalization form.
  public func removeModels(forAccount account: String) async throws {
    let account = AccountKey.normalized(account)
    try KeyText.checked(account)
    _ = try await database.execute(
      "DELETE FROM \(table) WHERE account_hash = sha256(convert_to($1, 'UTF8'))",
      [.text(account)])
  }

  public func removeAll() async throws {
    _ = try await database.execute("DELETE FROM \(table)")
  }

  private func parameters(_ model: AuthModel, _ key: AccountKey) throws -> [PostgresValue] {
    let keyText = try KeyText.key(key)
    let encoded: Data
    do {
      encoded = try JSONEncoder().encode(model)
    } catch {
      throw PostgresError(.encodingFailed, "the model could not be encoded (\(type(of: error)))")
    }
    let stored: Data
    do {
      stored = try sealing.map { try $0.seal(encoded, for: key) } ?? encoded
    } catch {
      throw PostgresError(.encodingFailed, "the model could not be sealed (\(type(of: error)))")
    }
    return [.text(keyText), .text(key.account), .text(key.mode.rawValue), .bytes(stored)]
  }

  private func report(_ key: AccountKey, _ message: String) {
    onIssue?(PostgresError(.corruptRow, "\(message); key \(key) reads as empty"))
  }
}
