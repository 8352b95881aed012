import SyncPrimitives

/// Fans events out to every subscriber's `AsyncStream`.
///
/// Each subscriber buffers the newest `bufferSize` events, so a slow reader drops old events
/// instead of slowing the coordinator. With no subscriber an event costs one lock.
final class EventBroadcaster<Event: Sendable>: Sendable {
  private struct Subscribers {
    var next = 0
    var continuations: [Int: AsyncStream<Event>.Continuation] = [:]
  }

  private let subscribers = LockedState(Subscribers())
  private let bufferSize: Int

  init(bufferSize: Int = 1024) { self.bufferSize = bufferSize }

  /// A new stream that receives every event emitted from now on.
  func subscribe() -> AsyncStream<Event> {
    let (stream, continuation) = AsyncStream.makeStream(
      of: Event.self, bufferingPolicy: .bufferingNewest(bufferSize))
    let id = subscribers.withLock { state -> Int in
      state.next += 1
      state.continuations[state.next] = continuation
      return state.next
    }
    continuation.onTermination = { [weak self] _ in
      self?.subscribers.withLock { _ = $0.continuations.removeValue(forKey: id) }
    }
    return stream
  }

  /// Sends `event` to every subscriber.
  func emit(_ event: Event) {
    let targets = subscribers.withLock { state in
      state.continuations.isEmpty ? [] : Array(state.continuations.values)
    }
    for continuation in targets { continuation.yield(event) }
  }

  /// Ends every subscriber's stream.
  func finish() {
    let targets = subscribers.withLock { state in
      defer { state.continuations.removeAll() }
      return Array(state.continuations.values)
    }
    for continuation in targets { continuation.finish() }
  }
}
