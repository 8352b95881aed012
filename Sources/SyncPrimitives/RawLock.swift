#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A `pthread_mutex_t` in memory of its own, reached through a raw pointer, for a lock taken on
/// every request: taking or releasing it retains nothing. A ``Lock`` keeps its mutex in a
/// class's storage, and the compiler retains and releases that storage around each call into
/// pthreads: an atomic write to the lock's object that every thread taking the lock shares.
///
/// Its owner frees it with ``destroy()``, exactly once, when nothing can take it any more (a
/// stripe of the coordinator's table frees its lock in its `deinit`).
public struct RawLock: @unchecked Sendable {
  @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

  public init() {
    mutex = .allocate(capacity: 1)
    initializeMutex(mutex)
  }

  @inlinable @inline(__always)
  public func lock() { _ = pthread_mutex_lock(mutex) }

  @inlinable @inline(__always)
  public func unlock() { _ = pthread_mutex_unlock(mutex) }

  /// Frees the mutex. Call it once, when no thread holds or can take the lock.
  public func destroy() {
    _ = pthread_mutex_destroy(mutex)
    mutex.deinitialize(count: 1)
    mutex.deallocate()
  }
}
