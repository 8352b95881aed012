import CSyncPrimitives

/// A counter any thread can bump without a lock: the coordinator's flight ids, and the counts of
/// keys and flights its eviction check reads, which every stripe of the account table shares.
///
/// Relaxed ordering: each value is unique and increasing, and nothing else is published
/// through it.
package final class AtomicCounter: @unchecked Sendable {
  private let counter: OpaquePointer

  package init(_ initial: UInt64 = 0) {
    counter = OpaquePointer(csp_counter_create(initial))
  }

  deinit { csp_counter_destroy(UnsafeMutablePointer(counter)) }

  /// Adds one and returns the new value.
  @inline(__always)
  package func next() -> UInt64 { csp_counter_increment(UnsafeMutablePointer(counter)) }

  /// Adds `amount` and returns the new value.
  @discardableResult
  package func add(_ amount: UInt64) -> UInt64 {
    csp_counter_add(UnsafeMutablePointer(counter), amount)
  }

  /// The current value.
  package var value: UInt64 { csp_counter_load(UnsafeMutablePointer(counter)) }
}
