import SyncPrimitives

/// A stripe's lock, and its epoch: a count of the times the lock was taken to change something.
///
/// Every holder that may change a key of the stripe (its state machine, its model, its
/// presence) takes the lock with ``lock()`` or ``withLock(_:)``, which advance the epoch while
/// the lock is held. A hit takes it with ``lockToRead()``, which does not. A thread's replica of a
/// model (``HitReplicas``) records the epoch it was made at, under the lock, and is served
/// only while the epoch has not moved: nothing in the stripe can have changed since, so the
/// machine would decide the hit the same way. The replica reads the epoch without the lock,
/// which writes no shared memory: on many cores, readers of a hot key only share the epoch's
/// cache line, in read mode, until the stripe changes.
struct StripeLock: Sendable {
  /// A raw lock: every request and every step of a flight takes it, and a `Lock` is retained
  /// and released around each call into pthreads, a write to memory every thread taking the
  /// stripe's lock shares (B5: 13 % fewer retains, docs/benchmarks.md).
  private let mutex = RawLock()
  /// Advanced under `mutex` by every holder that may change the stripe.
  let epoch = AtomicCounter(padded: true)

  /// Takes the lock to change the stripe: the epoch advances, so every replica made before is
  /// stale from now on.
  @inline(__always)
  func lock() {
    mutex.lock()
    _ = epoch.next()
  }

  /// Takes the lock for a hit: the epoch does not move. A holder that then changes the stripe
  /// after all calls ``markChanged()`` before it unlocks.
  @inline(__always)
  func lockToRead() { mutex.lock() }

  /// Advances the epoch of a lock taken with ``lockToRead()`` that changed the stripe (or of a
  /// stripe no one can reach any more: its coordinator's deinit).
  @inline(__always)
  func markChanged() { _ = epoch.next() }

  @inline(__always)
  func unlock() { mutex.unlock() }

  /// Frees the mutex: its stripe's `deinit`, when no thread can take it any more.
  func destroy() { mutex.destroy() }

  @inline(__always)
  func withLock<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }

  /// For reading only: the epoch does not move.
  @inline(__always)
  func withLockToRead<R>(_ body: () throws -> R) rethrows -> R {
    lockToRead()
    defer { unlock() }
    return try body()
  }
}
