#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// The baselines' lock. The benchmark is a package of its own and sees the library through its
// public API only, so it cannot use the library's package-access `LockedState`; this is the same
// design (the state and an adaptive pthread mutex in one allocation), so that the baselines and
// the coordinator pay the same price for a lock.

/// The state and its mutex, in one allocation.
final class LockedStorage<State>: ManagedBuffer<State, pthread_mutex_t> {
  static func make(_ initial: State) -> LockedStorage<State> {
    let storage = unsafeDowncast(
      create(minimumCapacity: 1) { _ in initial }, to: LockedStorage<State>.self)
    storage.withUnsafeMutablePointerToElements { mutex in
      mutex.initialize(to: pthread_mutex_t())
      #if canImport(Glibc)
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        let rc = pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
      #else
        let rc = pthread_mutex_init(mutex, nil)
      #endif
      precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
    }
    return storage
  }

  deinit {
    _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
  }
}

/// State behind a lock. Copies share the same state.
struct LockedState<State> {
  let storage: LockedStorage<State>

  init(_ initial: State) { storage = .make(initial) }

  @inline(__always)
  func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
    try storage.withUnsafeMutablePointers { state, mutex in
      pthread_mutex_lock(mutex)
      defer { pthread_mutex_unlock(mutex) }
      return try body(&state.pointee)
    }
  }
}

extension LockedState: @unchecked Sendable where State: Sendable {}
