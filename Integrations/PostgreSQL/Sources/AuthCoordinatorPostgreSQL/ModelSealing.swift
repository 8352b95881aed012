import Foundation
import TokenStore

/// Encrypts models before they reach the database and decrypts them after: refresh tokens in a
/// shared database are credentials.
///
/// Without sealing, a model is stored as JSON in the `model` column: anyone who can read the
/// table (a replica's credentials, a backup, a read replica, a support query) can read every
/// access and refresh token. With sealing, they see the key's digest, the account and the mode
/// (the columns the package queries by), the fence, and the sealed bytes' length.
///
/// Seal with an authenticated cipher keyed by the integrator (AES-GCM from CryptoKit on Apple
/// platforms or swift-crypto elsewhere) and bind the key: pass `key`'s account and mode as
/// the additional authenticated data, so that a sealed model copied onto another key's row
/// fails to open instead of being served for that key.
///
/// **Say which failures are for good.** ``open(_:for:)`` throws for two reasons the store must
/// tell apart:
/// - The sealed bytes can never be opened (the cipher's authentication failed: changed, or
///   sealed for another key): throw ``PostgresError`` with code
///   ``PostgresError/Code-swift.struct/corruptRow``. The row reads as empty (the coordinator
///   authorizes again) and is reported to the store's `onIssue`.
/// - Anything else (a key service that is down or slow, a key not yet fetched) is a failure of
///   the moment: the read fails with ``PostgresError/Code-swift.struct/unsealingFailed``
///   (transient), the row is left as it is, and the next read tries again. It never reads as an
///   empty row: the coordinator is told the store failed (a `storeFailed` event) instead of
///   being told the key has no model.
///
/// ```swift
/// func open(_ sealed: Data, for key: AccountKey) throws -> Data {
///   let symmetricKey = try keyService.currentKey()  // down: a failure of the moment
///   do {
///     let box = try AES.GCM.SealedBox(combined: sealed)
///     return try AES.GCM.open(box, using: symmetricKey, authenticating: additionalData(key))
///   } catch is CryptoKitError {
///     // Changed, sealed for another key, or malformed: for good.
///     throw PostgresError(.corruptRow, "the sealed model does not open")
///   }
/// }
/// ```
///
/// This package ships no cipher of its own (it depends on nothing outside the Swift toolchain,
/// which has none on Linux).
public protocol ModelSealing: Sendable {
  /// Encrypts an encoded model for `key`.
  func seal(_ plaintext: Data, for key: AccountKey) throws -> Data

  /// Decrypts what ``seal(_:for:)`` produced for `key`.
  ///
  /// Throws ``PostgresError/Code-swift.struct/corruptRow`` when it can never be opened (changed,
  /// or made for another key): the row then reads as empty. Any other error fails the read
  /// (``PostgresError/Code-swift.struct/unsealingFailed``) and leaves the row as it is.
  func open(_ sealed: Data, for key: AccountKey) throws -> Data
}
