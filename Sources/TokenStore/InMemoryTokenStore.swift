import SyncPrimitives

/// A ``TokenStore`` that keeps models in memory only, for tests and for services that
/// re-authorize after every restart.
///
/// Calls never suspend for long and never fail.
public final class InMemoryTokenStore: FencedTokenStore {
  private let models: LockedState<[AccountKey: AuthModel]>
  /// The fence of the last fenced save per key (``FencedTokenStore``), guarded by `models`'
  /// lock order: always taken inside it.
  private let fences = LockedState<[AccountKey: UInt64]>([:])
  /// The revoked fences (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``),
  /// guarded by `models`' lock order as `fences` is.
  private let revoked = LockedState(RevokedFences())

  /// Creates a store, optionally pre-filled.
  ///
  /// - Parameter models: Models to start with.
  public init(_ models: [AccountKey: AuthModel] = [:]) {
    self.models = LockedState(models)
  }

  /// Stores `model` for `key` unless a fenced save with a larger fence landed for `key` since
  /// its model was last removed, or a sign-out of its account revoked the grant the fence
  /// belongs to (``FencedTokenStore``).
  ///
  /// - Parameters:
  ///   - model: The model to keep.
  ///   - key: The account.
  ///   - fence: The fence of the caller's grant.
  /// - Returns: Whether the model was stored.
  public func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async -> Bool {
    models.withLock { models in
      fences.withLock { fences in
        if models[key] != nil, let landed = fences[key], landed > fence { return false }
        if revoked.withLock({ $0.refuses(fence, for: key.account) }) { return false }
        models[key] = model
        fences[key] = fence
        return true
      }
    }
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
    models.withLock { models in
      models[key] = nil
      fences.withLock { _ = $0.removeValue(forKey: key) }
    }
  }

  /// Removes every model of `account`, in every mode.
  ///
  /// - Parameter account: The user id.
  public func removeModels(forAccount account: String) async {
    models.withLock { models in
      models = models.filter { $0.key.account != account }
      fences.withLock { fences in fences = fences.filter { $0.key.account != account } }
    }
  }

  /// Removes every model.
  public func removeAll() async {
    models.withLock { models in
      models.removeAll()
      fences.withLock { $0.removeAll() }
    }
  }

  /// Removes every model of `account` and refuses every later fenced save of its keys with a
  /// fence at most `fence` (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``).
  ///
  /// - Parameters:
  ///   - account: The user id.
  ///   - fence: The largest fence of a grant the account's sign-out revoked.
  public func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async
  {
    let account = AccountKey.normalized(account)
    models.withLock { models in
      models = models.filter { $0.key.account != account }
      fences.withLock { fences in fences = fences.filter { $0.key.account != account } }
      revoked.withLock { $0.mark(account, through: fence) }
    }
  }

  /// Removes every model and refuses every later fenced save with a fence at most `fence`
  /// (``FencedTokenStore/removeAll(refusingFencesThrough:)``).
  ///
  /// - Parameter fence: The largest fence of a grant the sign-out of everyone revoked.
  public func removeAll(refusingFencesThrough fence: UInt64) async {
    models.withLock { models in
      models.removeAll()
      fences.withLock { $0.removeAll() }
      revoked.withLock { $0.markAll(through: fence) }
    }
  }

  /// Whether a revoked fence refuses a fenced save of `account`'s keys under `fence`, for the
  /// fleet simulation's coverage counters. Reads, changes nothing.
  package func refusesRevokedFence(_ fence: UInt64, for account: String) -> Bool {
    revoked.withLock { $0.refuses(fence, for: AccountKey.normalized(account)) }
  }

  /// How many accounts carry a revoked fence, for tests: one per account at most.
  package var revokedFenceAccounts: Int { revoked.withLock { $0.accounts.count } }

  /// A synchronous copy of everything stored, for tests and diagnostics.
  public var snapshot: [AccountKey: AuthModel] {
    models.withLock { $0 }
  }
}
