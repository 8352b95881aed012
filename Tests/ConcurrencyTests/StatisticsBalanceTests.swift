import AuthCoordinator
import AuthCoordinatorTestKit
import SyncPrimitives
import Testing

extension ConcurrencySuites {
  /// `AuthCoordinator.Statistics` documents that flights balance "at every snapshot". The
  /// randomized stress once saw them unbalanced mid-run (ended + in progress = started + 1): a
  /// stopped flight was counted as cancelled or timed out in one counter update and taken out of
  /// `flightsInProgress` in another, after the authorizer's task was cancelled. This takes the
  /// snapshot deterministically in between: from the authorizer's cancellation handler, which
  /// the coordinator runs synchronously after counting the ending.
  @Suite struct StatisticsBalanceTests {
    @Test
    func flightsBalanceInASnapshotTakenWhileAFlightIsStopped() async throws {
      let coordinatorBox = LockedState<AuthCoordinator?>(nil)
      let snapshots = LockedState<[AuthCoordinator.Statistics]>([])
      let entered = LockedState(false)
      // The authorizer's own signal: entering it and its cancellation handler are no events.
      let authorizerChanged = ChangeSignal()
      let authorizer = ClosureAuthorizer { _ in
        try await withTaskCancellationHandler {
          entered.withLock { $0 = true }
          authorizerChanged.changed()
          let clock = ManualClock()
          try await clock.sleep(for: .seconds(1))  // never advanced: ends only when cancelled
          throw CancellationError()
        } onCancel: {
          if let coordinator = coordinatorBox.withLock({ $0 }) {
            snapshots.withLock { $0.append(coordinator.statistics) }
          }
          authorizerChanged.changed()
        }
      }
      let clock = ManualClock()
      var configuration = AuthCoordinator.Configuration()
      configuration.clock = clock
      configuration.now = clock.dateSource
      let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
      coordinatorBox.withLock { $0 = coordinator }

      let caller = Task { try await coordinator.authModel(for: AccountKey(account: "u1")) }
      try await authorizerChanged.waitUntil { entered.withLock { $0 } }
      let events = EventRecorder(coordinator)
      caller.cancel()
      _ = try? await caller.value
      try await events.first { event in
        if case .flightCancelled = event { return true }
        return false
      }
      #expect(coordinator.statistics.flightsCancelled == 1)
      // The counters change before the authorizer is cancelled: wait for its handler's snapshot.
      try await authorizerChanged.waitUntil { snapshots.withLock { !$0.isEmpty } }

      #expect(flightsBalance(coordinator.statistics), "balanced once the flight is stopped")
      let seen = try #require(snapshots.withLock { $0.first })
      #expect(flightsBalance(seen), "snapshot taken while the flight was being stopped: \(seen)")
    }
  }
}
