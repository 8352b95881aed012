import AuthCoordinator
import Foundation

/// Reference "no synchronisation": the hit of `BareLockSource` with no lock at all, reading a
/// plain stored property (the floor, like the no-sync row of Go's benchmarks).
///
/// The same work as the lock read (look the key up, copy the model out, check its expiry against
/// the date source), so that lock read ÷ no sync is the price of the lock. Nothing ever writes
/// the property, which is why it may be read without a lock. The copy cannot be optimised away:
/// B1's loop folds the length of every returned model's `uid` into a checksum and fails the run
/// when the checksum is wrong. It has no slow path, so it takes part in B1 only.
final class NoSyncSource: TokenSource {
  let impl = Impl.noSync
  private let models: [AccountKey: AuthModel]
  private let now: @Sendable () -> Date

  init(seed: [AccountKey: AuthModel], now: @escaping @Sendable () -> Date) {
    models = seed
    self.now = now
  }

  var parked: Int { 0 }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    let date = now()
    if let model = models[key], model.isValid(at: date, leeway: refreshLeeway) {
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
