import Foundation

/// A manual clock for tests: time moves only when the test calls ``advance(by:)``.
///
/// Temporary: the project's shared test kit will replace it. Sleepers resume when the clock is
/// advanced past their deadline, or with `CancellationError` when their task is cancelled.
/// ``waitForSleepers(_:)`` lets a test wait (without sleeping) until code under test is asleep.
final class TestClock: Clock, @unchecked Sendable {
  struct Instant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
    func duration(to other: Instant) -> Duration { other.offset - offset }
    static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
  }

  private struct Sleeper {
    var deadline: Instant
    var continuation: CheckedContinuation<Void, any Error>
  }

  private let lock = NSLock()
  private var current = Instant(offset: .zero)
  private var sleepers: [UInt64: Sleeper] = [:]
  private var nextID: UInt64 = 0
  private var sleeperWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

  var now: Instant { lock.withLock { current } }
  var minimumResolution: Duration { .zero }

  /// How many tasks sleep on the clock now.
  var sleeperCount: Int { lock.withLock { sleepers.count } }

  func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let id = lock.withLock { () -> UInt64 in
      nextID += 1
      return nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let (resumeNow, ready) = lock.withLock { () -> (Bool, [CheckedContinuation<Void, Never>]) in
          if deadline <= current || Task.isCancelled { return (true, []) }
          sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          return (false, takeReadyWaiters())
        }
        for waiter in ready { waiter.resume() }
        if resumeNow {
          if Task.isCancelled {
            continuation.resume(throwing: CancellationError())
          } else {
            continuation.resume()
          }
        }
      }
    } onCancel: {
      let sleeper = lock.withLock { sleepers.removeValue(forKey: id) }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves time forward and wakes every sleeper whose deadline has come.
  func advance(by duration: Duration) {
    let due = lock.withLock { () -> [CheckedContinuation<Void, any Error>] in
      current = current.advanced(by: duration)
      let dueIDs = sleepers.filter { $0.value.deadline <= current }.map(\.key)
      return dueIDs.compactMap { sleepers.removeValue(forKey: $0)?.continuation }
    }
    for continuation in due { continuation.resume() }
  }

  /// Returns once at least `count` tasks sleep on the clock.
  func waitForSleepers(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = lock.withLock { () -> Bool in
        if sleepers.count >= count { return true }
        sleeperWaiters.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  /// Removes and returns the waiters satisfied by the current sleeper count (lock held).
  private func takeReadyWaiters() -> [CheckedContinuation<Void, Never>] {
    let count = sleepers.count
    let ready = sleeperWaiters.filter { $0.count <= count }.map(\.continuation)
    sleeperWaiters.removeAll { $0.count <= count }
    return ready
  }
}
