import AuthCoordinatorTestKit
import SyncPrimitives
import Testing

@testable import AuthCoordinator

/// The waiter queue on its own: arrival order, exactly-once resumption, O(1) leave.
@Suite(.timeLimit(.minutes(2))) struct WaiterQueueTests {
  let model = AuthModel(uid: "2088", accessToken: "t", mcUid: "u1")

  /// Waiters parked in a shuffled order are resumed in the order they arrived (reserved).
  @Test func waitersAreResumedInArrivalOrder() async throws {
    let queue = WaiterQueue(counters: CoordinatorCounters())
    let n = 500
    let tickets = (0..<n).map { _ in queue.reserve()! }
    let resumed = LockedState<[Int]>([])
    queue.resumeObserver = { ticket in resumed.withLock { $0.append(ticket) } }
    var tasks: [Task<Void, Never>] = []
    // Tracked, so that the test can await them parking (checked each time one stops running).
    let callers = CallerTracker()
    // Park them in a shuffled order: arrival order is the reservation order, not the parking one.
    for ticket in tickets.shuffled() {
      tasks.append(callers.task { _ = await queue.wait(ticket) })
    }
    // Every waiter must be parked before the flight ends, or a late parker wakes at once.
    try await callers.waitUntil { queue.parkedCount == n }
    queue.finish(.success(model))
    for task in tasks { await task.value }
    #expect(resumed.withLock { $0 } == tickets)
  }

  @Test func aLeaverIsResumedOnceWithItsReasonAndTheRestGetTheOutcome() async {
    let counters = CoordinatorCounters()
    let left = LockedState(0)
    let queue = WaiterQueue(counters: counters) { left.withLock { $0 += 1 } }
    let a = queue.reserve()!
    let b = queue.reserve()!
    queue.leave(a, .timedOut)
    queue.leave(a, .cancelled)  // a second leave is ignored
    if case .failure(let error as AuthCoordinatorError) = await queue.wait(a) {
      #expect(error.code == .timedOut)
    } else {
      Issue.record("the leaver did not fail with its reason")
    }
    #expect(queue.activeCount == 1)
    #expect(left.withLock { $0 } == 0, "b still waits")
    #expect(queue.finish(.success(model)) == 1)
    #expect(queue.finish(.retry) == 0, "finishing twice resumes nobody")
    if case .success(let got) = await queue.wait(b) {
      #expect(got == model)
    } else {
      Issue.record("b did not get the outcome")
    }
    #expect(counters.snapshot.waitingCallers == 0)
    #expect(queue.reserve() == nil, "a finished queue takes no one")
  }

  @Test func theLastLeaverNotifiesOnce() {
    let left = LockedState(0)
    let queue = WaiterQueue(counters: CoordinatorCounters()) { left.withLock { $0 += 1 } }
    let tickets = (0..<3).map { _ in queue.reserve()! }
    for ticket in tickets { queue.leave(ticket, .cancelled) }
    #expect(left.withLock { $0 } == 1)
    #expect(queue.activeCount == 0)
  }

  @Test func leavingAfterTheFlightEndedChangesNothing() async {
    let queue = WaiterQueue(counters: CoordinatorCounters())
    let ticket = queue.reserve()!
    queue.finish(.success(model))
    queue.leave(ticket, .cancelled)
    if case .success = await queue.wait(ticket) {} else { Issue.record("the outcome was lost") }
  }
}

extension WaiterQueueTests {
  /// Closing an abandoned flight is atomic with joins: a caller that reserves afterwards is
  /// refused (and asks the state machine again, starting a new flight) instead of inheriting the cancellation.
  @Test func closeIfIdleRefusesLaterJoinersAndNeverClosesOnAWaiter() async {
    let busy = WaiterQueue(counters: CoordinatorCounters())
    let ticket = busy.reserve()!
    #expect(!busy.closeIfIdle(.failure(CancellationError())), "a caller is waiting")
    busy.leave(ticket, .cancelled)
    #expect(busy.closeIfIdle(.failure(CancellationError())))
    #expect(busy.reserve() == nil, "closed: a later caller must not join")
    #expect(busy.finish(.success(model)) == 0, "finishing a closed queue resumes nobody")
  }
}

extension WaiterQueue {
  /// Parks the caller holding `ticket` and returns what it woke to, as an outcome (the
  /// coordinator parks and reads the result itself; this is the tests' view).
  nonisolated(nonsending) func wait(_ ticket: Int) async -> Outcome {
    switch await park(ticket) {
    case .finished:
      guard let outcome = finalOutcome else {
        preconditionFailure("waiter \(ticket) woke without an outcome")
      }
      return outcome
    case .cancelled: return .failure(LeaveReason.cancelled.error)
    case .timedOut: return .failure(LeaveReason.timedOut.error)
    }
  }
}
