import SyncPrimitives
import Testing

@testable import AuthCoordinator

/// An event nobody subscribed to is not made, and takes no lock every thread shares: the
/// broadcaster counts its subscribers, and the count follows subscriptions that end and a
/// broadcaster that finishes.
@Suite struct EventBroadcasterTests {
  /// Counts how often an event was made.
  final class Made: Sendable {
    private let count = LockedState(0)
    var value: Int { count.withLock { $0 } }

    func event(_ value: Int) -> Int {
      count.withLock { $0 += 1 }
      return value
    }
  }

  @Test func anEventWithoutSubscribersIsNotMade() {
    let broadcaster = EventBroadcaster<Int>()
    let made = Made()
    broadcaster.emit(made.event(1))
    #expect(made.value == 0)
  }

  @Test func aSubscriberGetsEventsUntilItsStreamEnds() async {
    let broadcaster = EventBroadcaster<Int>()
    let made = Made()
    var stream: AsyncStream<Int>? = broadcaster.subscribe()
    broadcaster.emit(made.event(1))
    broadcaster.emit(made.event(2))
    #expect(made.value == 2)
    var iterator = stream!.makeAsyncIterator()
    #expect(await iterator.next() == 1)
    #expect(await iterator.next() == 2)
    // The stream goes away: its termination removes the subscriber.
    stream = nil
    iterator = AsyncStream<Int> { $0.finish() }.makeAsyncIterator()
    broadcaster.emit(made.event(3))
    #expect(made.value == 2)
    // A new subscriber counts again.
    let again = broadcaster.subscribe()
    broadcaster.emit(made.event(4))
    #expect(made.value == 3)
    var next = again.makeAsyncIterator()
    #expect(await next.next() == 4)
  }

  @Test func aFinishedBroadcasterMakesNoEvents() async {
    let broadcaster = EventBroadcaster<Int>()
    let made = Made()
    let stream = broadcaster.subscribe()
    broadcaster.finish()
    broadcaster.emit(made.event(1))
    #expect(made.value == 0)
    var iterator = stream.makeAsyncIterator()
    #expect(await iterator.next() == nil)
    // A subscription after the end ends at once and counts for nothing.
    var late = broadcaster.subscribe().makeAsyncIterator()
    #expect(await late.next() == nil)
    broadcaster.emit(made.event(2))
    #expect(made.value == 0)
  }
}
