import Testing

@testable import AuthCoordinator

/// A stripe's flight deadlines, earliest first, tested synchronously.
@Suite(.timeLimit(.minutes(2))) struct DeadlineQueueTests {
  func entry(_ seconds: Int, _ flight: UInt64, _ phase: AuthEvent.FlightPhase = .authorization)
    -> DeadlineQueue.Entry
  {
    .init(
      at: .seconds(seconds), key: AccountKey(account: "u\(flight)"), flight: flight, phase: phase)
  }

  @Test func popsOnlyWhatIsDueEarliestFirst() {
    var queue = DeadlineQueue()
    for (seconds, flight) in [(30, 3), (10, 1), (50, 5), (20, 2), (40, 4)] {
      queue.insert(entry(seconds, UInt64(flight)))
    }
    #expect(queue.earliest == .seconds(10))
    #expect(queue.popDue(now: .seconds(5)).isEmpty)
    #expect(queue.popDue(now: .seconds(30)).map(\.flight) == [1, 2, 3])
    #expect(queue.earliest == .seconds(40))
    #expect(queue.popDue(now: .seconds(100)).map(\.flight) == [4, 5])
    #expect(queue.earliest == nil)
  }

  @Test func keepsHeapOrderUnderRandomInsertions() {
    var queue = DeadlineQueue()
    var generator = SystemRandomNumberGenerator()
    let times = (0..<1_000).map { _ in Int.random(in: 0..<10_000, using: &generator) }
    for (index, time) in times.enumerated() { queue.insert(entry(time, UInt64(index))) }
    let popped = queue.popDue(now: .seconds(10_000)).map(\.at)
    #expect(popped == times.sorted().map { .seconds($0) })
  }

  @Test func aPrunedHeapStillPopsInDeadlineOrder() {
    var queue = DeadlineQueue()
    var generator = SystemRandomNumberGenerator()
    let times = (0..<2_000).map { _ in Int.random(in: 0..<10_000, using: &generator) }
    for (index, time) in times.enumerated() { queue.insert(entry(time, UInt64(index))) }
    queue.prune { $0.flight % 3 != 0 }
    let kept = times.enumerated().filter { $0.offset % 3 != 0 }.map(\.element)
    #expect(queue.count == kept.count)
    #expect(queue.earliest == .seconds(kept.min()!))
    // Inserting after a prune keeps the order too.
    queue.insert(entry(-1, 1))
    let popped = queue.popDue(now: .seconds(10_000)).map(\.at)
    let inDeadlineOrder = popped == ([-1] + kept.sorted()).map { .seconds($0) }
    #expect(inDeadlineOrder)
  }

  @Test func pruneDropsEndedFlights() {
    var queue = DeadlineQueue()
    for flight in UInt64(1)...10 { queue.insert(entry(Int(flight), flight)) }
    queue.insert(entry(3, 4, .exchange))
    queue.prune { $0.flight.isMultiple(of: 2) }
    #expect(queue.count == 6)
    #expect(queue.popDue(now: .seconds(100)).map(\.flight) == [2, 4, 4, 6, 8, 10])
  }
}
