import Foundation
import SyncPrimitives

/// A clock that moves only when a test says so.
///
/// Pass it as ``/AuthCoordinator/AuthCoordinator/Configuration/clock`` and its
/// ``dateSource`` as ``/AuthCoordinator/AuthCoordinator/Configuration/now``: deadlines, the
/// loop window, grace periods and token expiry then all follow ``advance(by:)``, and a test
/// never sleeps.
///
/// ```swift
/// let clock = ManualClock()
/// var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
/// configuration.clock = clock
/// configuration.now = clock.dateSource
/// // ... start a request, wait until the authorizer was called, then:
/// clock.advance(by: .seconds(121))  // the flight times out
/// ```
public final class ManualClock: Clock, @unchecked Sendable {
  /// A point on the manual clock: the time elapsed since the clock was created.
  public struct Instant: InstantProtocol, CustomStringConvertible {
    /// The time since the clock's start.
    public var offset: Duration

    /// Creates an instant.
    ///
    /// - Parameter offset: The time since the clock's start.
    public init(offset: Duration) { self.offset = offset }

    /// The instant `duration` later.
    ///
    /// - Parameter duration: How far to move.
    /// - Returns: The later instant.
    public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }

    /// The duration from this instant to `other`.
    ///
    /// - Parameter other: The later instant.
    /// - Returns: `other - self`.
    public func duration(to other: Instant) -> Duration { other.offset - offset }

    /// Orders instants by offset.
    ///
    /// - Parameters:
    ///   - lhs: An instant.
    ///   - rhs: Another instant.
    /// - Returns: `true` when `lhs` comes before `rhs`.
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }

    /// `+12.5 seconds`.
    public var description: String { "+\(offset)" }
  }

  private struct Sleeper {
    var deadline: Instant
    var continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var now = Instant(offset: .zero)
    var nextID = 0
    var sleepers: [Int: Sleeper] = [:]
    var sleeperWatchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }

  private let state = LockedState(State())

  /// The wall-clock date at the clock's start; ``date`` moves with the clock from here.
  public let startDate: Date

  /// Creates a clock at offset zero.
  ///
  /// - Parameter startDate: The wall-clock date that offset zero corresponds to.
  public init(startDate: Date = Date(timeIntervalSince1970: 1_800_000_000)) {
    self.startDate = startDate
  }

  /// The current instant.
  public var now: Instant { state.withLock { $0.now } }

  /// Zero: the clock has no resolution limit.
  public var minimumResolution: Duration { .zero }

  /// The wall-clock date matching ``now``.
  public var date: Date { startDate.addingTimeInterval(now.offset.seconds) }

  /// A date source tied to this clock, for ``/AuthCoordinator/AuthCoordinator/Configuration/now``.
  public var dateSource: @Sendable () -> Date { { [self] in self.date } }

  /// How many tasks are sleeping on the clock now.
  public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

  /// Suspends until the clock reaches `deadline` (returns at once if it already has).
  ///
  /// - Parameters:
  ///   - deadline: When to wake.
  ///   - tolerance: Ignored.
  /// - Throws: `CancellationError` when the sleeping task is cancelled.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let id = state.withLock { state -> Int in
      state.nextID += 1
      return state.nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let (resumeNow, watchers) = state.withLock {
          state -> (Bool, [CheckedContinuation<Void, Never>]) in
          if Task.isCancelled || deadline <= state.now { return (true, []) }
          state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
          return (false, Self.takeSatisfiedWatchers(&state))
        }
        for watcher in watchers { watcher.resume() }
        if resumeNow {
          if Task.isCancelled {
            continuation.resume(throwing: CancellationError())
          } else {
            continuation.resume()
          }
        }
      }
    } onCancel: {
      let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
      sleeper?.continuation.resume(throwing: CancellationError())
    }
  }

  /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
  ///
  /// - Parameter duration: How far to move; must not be negative.
  public func advance(by duration: Duration) {
    precondition(duration >= .zero, "ManualClock cannot go backwards")
    let due = state.withLock { state -> [Sleeper] in
      state.now = state.now.advanced(by: duration)
      let now = state.now
      let due = state.sleepers.filter { $0.value.deadline <= now }
      for id in due.keys { state.sleepers.removeValue(forKey: id) }
      return due.values.sorted { $0.deadline < $1.deadline }
    }
    for sleeper in due { sleeper.continuation.resume() }
  }

  /// Waits (without polling) until at least `count` tasks sleep on the clock.
  ///
  /// Use it to be sure a deadline timer is armed before ``advance(by:)``.
  ///
  /// - Parameter count: How many sleepers to wait for.
  public func waitForSleepers(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.sleepers.count >= count { return true }
        state.sleeperWatchers.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  private static func takeSatisfiedWatchers(_ state: inout State) -> [CheckedContinuation<
    Void, Never
  >] {
    let count = state.sleepers.count
    var ready: [CheckedContinuation<Void, Never>] = []
    state.sleeperWatchers.removeAll { watcher in
      guard watcher.count <= count else { return false }
      ready.append(watcher.continuation)
      return true
    }
    return ready
  }
}
