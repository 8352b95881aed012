import CSyncPrimitives

/// One object per thread, for state that only its thread ever touches: a hit's replicas of the
/// models it served (`HitReplicas` in the coordinator).
///
/// A C `_Thread_local` pointer, so that reading it costs a few instructions; a `pthread_key_t`
/// behind it releases the object when its thread exits. There is one slot per process, for one
/// type of object: every user in the package must agree on `Object`.
public enum ThreadSlot<Object: AnyObject> {
  /// This thread's object, if one was installed on it.
  @inlinable @inline(__always)
  public static var current: Object? {
    guard let raw = csp_thread_slot_get() else { return nil }
    #if DEBUG
      // A second type in the one slot would be read as the first: caught in debug builds.
      precondition(
        Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue() is Object,
        "ThreadSlot: this thread's object is not a \(Object.self)")
    #endif
    return Unmanaged<Object>.fromOpaque(raw).takeUnretainedValue()
  }

  /// Installs `object` as this thread's, retained until the thread exits. Call it once per
  /// thread, when ``current`` is `nil`.
  public static func install(_ object: Object) {
    precondition(csp_thread_slot_get() == nil, "ThreadSlot: this thread already has an object")
    csp_thread_slot_set(Unmanaged.passRetained(object).toOpaque(), releaseThreadObject)
  }
}

/// Releases the object a thread installed, when the thread exits.
private func releaseThreadObject(_ raw: UnsafeMutableRawPointer?) {
  guard let raw else { return }
  Unmanaged<AnyObject>.fromOpaque(raw).release()
}
