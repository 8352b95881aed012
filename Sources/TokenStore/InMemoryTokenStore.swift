import SyncPrimitives

/// A ``TokenStore`` that keeps models in memory only, for tests and for services that
/// re-authorize after every restart.
///
/// Calls never suspend for long and never fail.
public final class InMemoryTokenStore: TokenStore {
  private let models: LockedState<[AccountKey: AuthModel]>

  /// Creates a store, optionally pre-filled.
  ///
  /// - Parameter models: Models to start with.
  public init(_ models: [AccountKey: AuthModel] = [:]) {
    self.models = LockedState(models)
  }

  /// Reads the model stored for `key`.
  ///
  /// - Parameter key: The account.
  /// - Returns: The stored model, or `nil`.
  public func model(for key: AccountKey) async -> AuthModel? {
    models.withLock { $0[key] }
  }

  /// Stores `model` for `key`.
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  public func save(_ model: AuthModel, for key: AccountKey) async {
    models.withLock { $0[key] = model }
  }

  /// Removes the model stored for `key`.
  ///
  /// - Parameter key: The account.
  public func removeModel(for key: AccountKey) async {
    _ = models.withLock { $0.removeValue(forKey: key) }
  }

  /// Removes every model of the user `mcUid`, in every mode.
  ///
  /// - Parameter mcUid: The host app's user id.
  public func removeModels(forMcUid mcUid: String) async {
    models.withLock { models in models = models.filter { $0.key.mcUid != mcUid } }
  }

  /// Removes every model.
  public func removeAll() async {
    models.withLock { $0.removeAll() }
  }

  /// A synchronous copy of everything stored, for tests and diagnostics.
  public var snapshot: [AccountKey: AuthModel] {
    models.withLock { $0 }
  }
}
