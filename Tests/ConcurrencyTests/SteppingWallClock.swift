import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// A wall clock that follows a ``ManualClock`` and can be stepped, as NTP or a person steps a
/// machine's clock (`STRESS_WALL_STEPS=1`).
///
/// The coordinator's deadlines run on the monotonic ``ManualClock``, which never steps; this
/// clock dates models (``AuthCoordinator/AuthCoordinator/Configuration/now``), the authorizer's
/// expiries and the in-memory lease's records, so a step makes cached models expire at once or
/// live on, and moves every lease expiry alike.
final class SteppingWallClock: Sendable {
  private let clock: ManualClock
  private let offset = LockedState<TimeInterval>(0)

  init(following clock: ManualClock) { self.clock = clock }

  /// The wall clock's time now.
  var date: Date { clock.date.addingTimeInterval(offset.withLock { $0 }) }

  /// ``date`` as a closure, for the configuration, the authorizer and the lease.
  var source: @Sendable () -> Date { { [self] in self.date } }

  /// How far the clock was stepped in all, from the monotonic clock's date.
  var totalStep: TimeInterval { offset.withLock { $0 } }

  /// Steps the clock forwards (positive) or backwards (negative).
  func step(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }
}
