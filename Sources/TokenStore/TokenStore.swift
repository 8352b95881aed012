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
///   func removeModel(for key: AccountKey) async throws { ... }
///   func removeModels(forMcUid mcUid: String) async throws { ... }
///   func removeAll() async throws { ... }
/// }
/// ```
///
/// A logout must leave no model of the user behind, in any mode, including modes this process
/// never used. The coordinator asks for that with ``removeModels(forMcUid:)``. Its default
/// implementation calls ``removeAll()``: it never leaves a token behind, but it signs every
/// other user of the store out too. A store that holds more than one user should implement it
/// to remove exactly the keys whose ``AccountKey/mcUid`` matches.
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

  /// Removes the model stored for `key`, if any.
  ///
  /// - Parameter key: The account.
  /// - Throws: When the store could not be changed.
  func removeModel(for key: AccountKey) async throws

  /// Removes every model stored for the user `mcUid`, whatever its ``AuthMode``.
  ///
  /// When this returns without throwing, no key whose ``AccountKey/mcUid`` is `mcUid` may be
  /// read back. The default implementation calls ``removeAll()``, which is correct but removes
  /// the other users' models too.
  ///
  /// - Parameter mcUid: The host app's user id.
  /// - Throws: When the store could not be changed.
  func removeModels(forMcUid mcUid: String) async throws

  /// Removes every stored model.
  ///
  /// - Throws: When the store could not be changed.
  func removeAll() async throws
}

extension TokenStore {
  /// Removes every stored model (see ``TokenStore/removeModels(forMcUid:)``): correct for any
  /// store, but broader than needed. Implement the requirement to remove only `mcUid`'s keys.
  ///
  /// - Parameter mcUid: The host app's user id.
  /// - Throws: When the store could not be changed.
  public func removeModels(forMcUid mcUid: String) async throws {
    try await removeAll()
  }
}
