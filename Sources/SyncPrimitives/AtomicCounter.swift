import CSyncPrimitives

/// A counter any thread can bump without a lock: the coordinator's flight ids, and the counts of
/// keys and flights its eviction check reads, which every stripe of the account table shares.
///
/// Relaxed ordering: each value is unique and increasing, and nothing else is published
/// through it.
public final class AtomicCounter: @unchecked Sendable {
  @usableFromInline let counter: OpaquePointer

  /// - Parameters:
  ///   - initial: The first value.
  ///   - padded: Gives the counter cache lines of its own, so that threads reading it are not
  ///     disturbed by writes to memory allocated next to it (a hit's check of its stripe's
  ///     epoch, ``ThreadSlot``'s users).
  public init(_ initial: UInt64 = 0, padded: Bool = false) {
    counter = OpaquePointer(
      padded ? csp_counter_create_padded(initial) : csp_counter_create(initial))
  }

  deinit { csp_counter_destroy(UnsafeMutablePointer(counter)) }

  // Inlined, each call reads the counter through a raw pointer: `withExtendedLifetime` keeps
  // the object, whose `deinit` frees that memory, alive until the access is done (it costs no
  // retain: the caller already holds the object).

  /// Adds one and returns the new value.
  @inlinable @inline(__always)
  public func next() -> UInt64 {
    withExtendedLifetime(self) { csp_counter_increment(UnsafeMutablePointer(counter)) }
  }

  /// Adds one, for a counter only one thread ever writes while others may read it: a plain
  /// load and store, cheaper than ``next()``'s read-modify-write. Never call it from two threads.
  @inlinable @inline(__always)
  public func incrementOwned() {
    withExtendedLifetime(self) { csp_counter_increment_owned(UnsafeMutablePointer(counter)) }
  }

  /// Adds `amount` and returns the new value.
  @discardableResult
  public func add(_ amount: UInt64) -> UInt64 {
    csp_counter_add(UnsafeMutablePointer(counter), amount)
  }

  /// The current value.
  @inlinable @inline(__always)
  public var value: UInt64 {
    withExtendedLifetime(self) { csp_counter_load(UnsafeMutablePointer(counter)) }
  }
}
