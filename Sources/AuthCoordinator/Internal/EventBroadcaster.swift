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
  private let bufferSize: Int

  package init(bufferSize: Int = 256) { self.bufferSize = bufferSize }

  package func subscribe() -> AsyncStream<Element> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: Element.self, bufferingPolicy: .bufferingNewest(bufferSize))
    let id = state.withLock { state -> UInt64? in
      guard !state.finished else { return nil }
      defer { state.nextID += 1 }
      state.subscribers[state.nextID] = continuation
      return state.nextID
    }
    guard let id else {
      continuation.finish()
      return stream
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
    }
    return stream
  }

  /// Sends `element` to every subscriber. With none, it costs one lock.
  package func emit(_ element: Element) {
    let subscribers = state.withLock { state in
      state.subscribers.isEmpty ? [] : Array(state.subscribers.values)
    }
    for subscriber in subscribers { subscriber.yield(element) }
  }

  package func finish() {
    let subscribers = state.withLock { state in
      state.finished = true
      defer { state.subscribers = [:] }
      return Array(state.subscribers.values)
    }
    for subscriber in subscribers { subscriber.finish() }
  }
}
