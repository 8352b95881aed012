import AuthCoordinator
import Foundation

/// Baseline "actor, no coalescing": the reentrancy trap.
///
/// The actor is free while `authorize` runs, so every caller that sees an expired (or rejected)
/// token starts its own authorization: N concurrent callers cause N authorizations.
actor PlainActorSource: TokenSource {
  nonisolated let impl = Impl.plainActor
  private var models: [AccountKey: AuthModel]
  private let authorize: Authorize
  private let now: @Sendable () -> Date
  private let parkedCount = LockedState(0)

  init(
    seed: [AccountKey: AuthModel], authorize: @escaping Authorize,
    now: @escaping @Sendable () -> Date
  ) {
    models = seed
    self.authorize = authorize
    self.now = now
  }

  nonisolated var parked: Int { parkedCount.withLock { $0 } }

  func get(_ key: AccountKey) async throws -> AuthModel {
    if let model = models[key], model.isValid(at: now(), leeway: refreshLeeway) { return model }
    return try await authorizeAndCache(key)
  }

  func refresh(_ key: AccountKey, rejecting token: String) async throws -> AuthModel {
    if let model = models[key], model.accessToken != token,
      model.isValid(at: now(), leeway: refreshLeeway)
    {
      return model
    }
    return try await authorizeAndCache(key)
  }

  private func authorizeAndCache(_ key: AccountKey) async throws -> AuthModel {
    parkedCount.withLock { $0 += 1 }
    // Suspends with the actor unlocked: the next caller sees the same stale state.
    let fresh = try await authorize(key)
    models[key] = fresh
    return fresh
  }
}
