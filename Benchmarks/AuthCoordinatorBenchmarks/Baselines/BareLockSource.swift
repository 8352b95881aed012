import AuthCoordinator
import Foundation

/// Baseline "bare lock-protected read": the practical floor for a cache hit.
///
/// The same work every correct hit does (look the key up, copy the model out, check its expiry
/// against the date source), under `LockedState` and nothing else. It has no slow path, so it
/// takes part in B1 only.
final class BareLockSource: TokenSource {
  let impl = Impl.bareLock
  private let models: LockedState<[AccountKey: AuthModel]>
  private let now: @Sendable () -> Date

  init(seed: [AccountKey: AuthModel], now: @escaping @Sendable () -> Date) {
    models = LockedState(seed)
    self.now = now
  }

  var parked: Int { 0 }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    let date = now()
    if let model = models.withLock({ $0[key] }), model.isValid(at: date, leeway: refreshLeeway) {
      return model
    }
    throw NoSlowPath()
  }

  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel {
    throw NoSlowPath()
  }
}
