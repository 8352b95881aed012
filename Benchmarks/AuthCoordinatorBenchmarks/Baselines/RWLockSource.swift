import AuthCoordinator
import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Baseline "reader-writer lock read": the hit of `BareLockSource` under a `pthread_rwlock_t`
/// read lock instead of a mutex, so that readers never exclude each other.
///
/// The same work as the lock read (look the key up, copy the model out, check its expiry against
/// the date source). It has no slow path, so it takes part in B1 only.
final class RWLockSource: TokenSource {
  let impl = Impl.rwLock
  private let models: RWLockedState<[AccountKey: AuthModel]>
  private let now: @Sendable () -> Date

  init(seed: [AccountKey: AuthModel], now: @escaping @Sendable () -> Date) {
    models = RWLockedState(seed)
    self.now = now
  }

  var parked: Int { 0 }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    let date = now()
    if let model = models.withReadLock({ $0[key] }), model.isValid(at: date, leeway: refreshLeeway)
    {
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

/// State and a `pthread_rwlock_t`, in one allocation (as `LockedStorage`). B1 only reads it.
final class RWLockedStorage<State>: ManagedBuffer<State, pthread_rwlock_t> {
  static func make(_ initial: State) -> RWLockedStorage<State> {
    let storage = unsafeDowncast(
      create(minimumCapacity: 1) { _ in initial }, to: RWLockedStorage<State>.self)
    storage.withUnsafeMutablePointerToElements { lock in
      lock.initialize(to: pthread_rwlock_t())
      let rc = pthread_rwlock_init(lock, nil)
      precondition(rc == 0, "pthread_rwlock_init failed: \(rc)")
    }
    return storage
  }

  deinit {
    _ = withUnsafeMutablePointerToElements { pthread_rwlock_destroy($0) }
  }
}

/// State behind a reader-writer lock (as `LockedState` behind a mutex). Copies share the state.
struct RWLockedState<State> {
  let storage: RWLockedStorage<State>

  init(_ initial: State) { storage = .make(initial) }

  @inline(__always)
  func withReadLock<R>(_ body: (State) throws -> R) rethrows -> R {
    try storage.withUnsafeMutablePointers { state, lock in
      pthread_rwlock_rdlock(lock)
      defer { pthread_rwlock_unlock(lock) }
      return try body(state.pointee)
    }
  }
}

extension RWLockedState: @unchecked Sendable where State: Sendable {}
