import SyncPrimitives

/// Fans values out to any number of `AsyncStream` subscribers.
///
/// Each ``subscribe()`` makes a new stream that sees the values yielded after it subscribed.
/// A slow subscriber keeps only its newest `bufferSize` values. ``finish()`` ends every stream
/// and refuses later subscribers' values (their streams end at once). Used by the coordinator's
/// ``AuthEvent`` stream, and with `package` access by modules built on the coordinator (for
/// example, the Alipay bridge) for event streams of their own.
package final class EventBroadcaster<Element: Sendable>: Sendable {
  private struct State {
    var subscribers: [UInt64: AsyncStream<Element>.Continuation] = [:]
    var nextID: UInt64 = 0
    var finished = false
  }

  private let state = LockedState(State())
  /// How many subscribers ``state`` holds: read without the lock by ``emit(_:)``, so that an
  /// event nobody subscribed to costs one load of memory no one writes, not a lock every
  /// thread of the process takes (a flight emits several, some under its stripe's lock).
  /// Changed under the lock, with the subscribers. A subscription that happens before an
  /// emission (a request made after `events` returned, say) is seen by it: a load never
  /// reads a value older than a store that happens before it.
  private let subscriberCount = AtomicCounter(padded: true)
  private let bufferSize: Int

  package init(bufferSize: Int = 256) { self.bufferSize = bufferSize }

  package func subscribe() -> AsyncStream<Element> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: Element.self, bufferingPolicy: .bufferingNewest(bufferSize))
    let id = state.withLock { state -> UInt64? in
      guard !state.finished else { return nil }
      defer { state.nextID += 1 }
      state.subscribers[state.nextID] = continuation
      subscriberCount.add(1)
      return state.nextID
    }
    guard let id else {
      continuation.finish()
      return stream
    }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      state.withLock { state in
        // Gone already when `finish()` took every subscriber.
        if state.subscribers.removeValue(forKey: id) != nil { subscriberCount.add(.max) }
      }
    }
    return stream
  }

  /// Sends `element` to every subscriber. With none, it costs one load of a counter: the
  /// element is not even made.
  package func emit(_ element: @autoclosure () -> Element) {
    guard subscriberCount.value != 0 else { return }
    let subscribers = state.withLock { state in
      state.subscribers.isEmpty ? [] : Array(state.subscribers.values)
    }
    guard !subscribers.isEmpty else { return }
    let element = element()
    for subscriber in subscribers { subscriber.yield(element) }
  }

  package func finish() {
    let subscribers = state.withLock { state in
      state.finished = true
      subscriberCount.add(0 &- UInt64(state.subscribers.count))
      defer { state.subscribers = [:] }
      return Array(state.subscribers.values)
    }
    for subscriber in subscribers { subscriber.finish() }
  }
}
