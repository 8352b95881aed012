#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// A `pthread_mutex_t` stored inline after a header (the state a ``LockedState`` guards), so a
/// lock and its state are one allocation.
@usableFromInline
final class LockStorage<Header>: ManagedBuffer<Header, pthread_mutex_t> {
  @usableFromInline
  static func make(_ header: Header) -> LockStorage<Header> {
    let buffer = self.create(minimumCapacity: 1) { _ in header }
    let storage = unsafeDowncast(buffer, to: LockStorage<Header>.self)
    storage.withUnsafeMutablePointerToElements { initializeMutex($0) }
    return storage
  }

  deinit {
    _ = withUnsafeMutablePointerToElements { pthread_mutex_destroy($0) }
  }
}

/// Initializes the mutex at `mutex` (uninitialized memory).
func initializeMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) {
  mutex.initialize(to: pthread_mutex_t())
  #if canImport(Glibc)
    // Adaptive: a contended lock spins briefly before sleeping in the kernel. The critical
    // sections here are a few dozen instructions; a futex sleep and wake-up costs
    // microseconds.
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

/// A small mutual-exclusion lock over a `pthread_mutex_t`. Copies share the same mutex.
///
/// The library uses its own lock rather than `Synchronization.Mutex` for two measured reasons:
/// ThreadSanitizer reports false races inside `Mutex` on Linux (a pthread mutex stays clean, so
/// the sanitizer run needs no suppressions), and `Mutex` needs macOS 15 / iOS 18.
public struct Lock: @unchecked Sendable {
  @usableFromInline let storage: LockStorage<Void>

  public init() { storage = .make(()) }

  @inlinable @inline(__always)
  public func lock() { storage.withUnsafeMutablePointerToElements { _ = pthread_mutex_lock($0) } }

  @inlinable @inline(__always)
  public func unlock() {
    storage.withUnsafeMutablePointerToElements { _ = pthread_mutex_unlock($0) }
  }

  @inlinable @inline(__always)
  public func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }
}

/// State behind a lock, in one allocation with it. Copies share the same state.
public struct LockedState<State> {
  @usableFromInline let storage: LockStorage<State>

  public init(_ initial: State) { storage = .make(initial) }

  @inlinable @inline(__always)
  public func withLock<R>(_ body: (inout State) throws -> R) rethrows -> R {
    try storage.withUnsafeMutablePointers { state, mutex in
      pthread_mutex_lock(mutex)
      defer { pthread_mutex_unlock(mutex) }
      return try body(&state.pointee)
    }
  }
}

extension LockedState {
  /// Whether `other` is a copy of this state (the same lock and state), not one made apart.
  public func isSame(as other: LockedState) -> Bool { storage === other.storage }
}

extension LockedState: @unchecked Sendable where State: Sendable {}
