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
/// fails to open instead of being served for that key. A row that fails to open reads as empty
/// (the coordinator authorizes again) and is reported as ``PostgresError/Code-swift.struct/corruptRow``.
///
/// This package ships no cipher of its own (it depends on nothing outside the Swift toolchain,
/// which has none on Linux).
public protocol ModelSealing: Sendable {
  /// Encrypts an encoded model for `key`.
  func seal(_ plaintext: Data, for key: AccountKey) throws -> Data

  /// Decrypts what ``seal(_:for:)`` produced for `key`; throws when it was changed or made
  /// for another key.
  func open(_ sealed: Data, for key: AccountKey) throws -> Data
}
