/// Where the coordinator keeps models between app launches.
///
/// A store maps an ``AccountKey`` to at most one ``AuthModel``. The coordinator calls it only
/// inside a flight and never on the cache-hit path, so a store may be slow (a file, the
/// keychain, a database) without slowing hits.
///
/// Implementations must be safe to call from many tasks at once. The package ships
/// ``InMemoryTokenStore`` and ``FileTokenStore``; write your own for the keychain or a database:
///
/// ```swift
/// actor KeychainTokenStore: TokenStore {
///   func model(for key: AccountKey) async throws -> AuthModel? { ... }
///   func save(_ model: AuthModel, for key: AccountKey) async throws { ... }
///   func removeModels(forAccount account: String) async throws { ... }
///   func removeAll() async throws { ... }
/// }
/// ```
///
/// A logout must leave no model of the user behind, in any mode, including modes this process
/// never used. The coordinator asks for that with ``removeModels(forAccount:)``: remove exactly
/// the keys whose ``AccountKey/account`` matches. A database implements each requirement as one
/// statement (`SELECT`, an upsert, `DELETE ... WHERE account = $1`, `DELETE`).
///
/// The requirements name an account (the user id of the app or service; for an Alipay
/// mini-program, the host app's `mcUid`).
///
/// > Important: Never log the models you store: they carry access tokens.
public protocol TokenStore: Sendable {
  /// Reads the model stored for `key`.
  ///
  /// - Parameter key: The account.
  /// - Returns: The stored model, or `nil` when there is none.
  /// - Throws: When the store cannot be read. The coordinator then treats the key as empty and
  ///   reports a `storeFailed` event.
  func model(for key: AccountKey) async throws -> AuthModel?

  /// Stores `model` for `key`, replacing what was there.
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  /// - Throws: When the model could not be made durable.
  func save(_ model: AuthModel, for key: AccountKey) async throws

  /// Removes every model stored for `account`, whatever its ``AuthMode``.
  ///
  /// When this returns without throwing, no key whose ``AccountKey/account`` is `account` may
  /// be read back, by this process or another that shares the store. Other accounts' models
  /// stay.
  ///
  /// - Parameter account: The user id (for an Alipay mini-program, the host app's `mcUid`).
  /// - Throws: When the store could not be changed.
  func removeModels(forAccount account: String) async throws

  /// Removes every stored model.
  ///
  /// - Throws: When the store could not be changed.
  func removeAll() async throws
}
