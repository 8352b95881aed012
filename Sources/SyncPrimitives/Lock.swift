#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A small mutual-exclusion lock over a heap-allocated `pthread_mutex_t`.
///
/// The library uses its own lock rather than `Synchronization.Mutex` for two measured reasons:
/// ThreadSanitizer reports false races inside `Mutex` on Linux (a pthread mutex stays clean, so
/// the sanitizer run needs no suppressions), and `Mutex` needs macOS 15 / iOS 18.
package final class Lock: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>

  package init() {
    mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    let rc = pthread_mutex_init(mutex, nil)
    precondition(rc == 0, "pthread_mutex_init failed: \(rc)")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }

  @inlinable @inline(__always)
  package func lock() { pthread_mutex_lock(mutexPointer) }

  @inlinable @inline(__always)
  package func unlock() { pthread_mutex_unlock(mutexPointer) }

  /// Takes the lock if it is free.
  ///
  /// - Returns: Whether the lock was taken.
  package func tryLock() -> Bool { pthread_mutex_trylock(mutexPointer) == 0 }

  @usableFromInline
  package var mutexPointer: UnsafeMutablePointer<pthread_mutex_t> { mutex }

  /// Runs `body` while holding the lock.
  @inlinable @inline(__always)
  package func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }
}

/// A value protected by a ``Lock``. Sendable when its state is: the lock makes access
/// exclusive, but it cannot make a non-Sendable value safe to hand to another task.
package final class LockedState<State> {
  @usableFromInline let lock = Lock()
  @usableFromInline var state: State

  package init(_ initial: State) { state = initial }

  /// Runs `body` with exclusive access to the state.
  @inlinable @inline(__always)
  package func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&state)
  }
}

extension LockedState: @unchecked Sendable where State: Sendable {}
