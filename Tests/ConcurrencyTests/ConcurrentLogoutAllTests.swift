import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

extension ConcurrencySuites {
  /// Concurrent `logoutAll`s, each a store barrier placed in every stripe of the account table,
  /// must not wait for each other in a cycle. The first striped version placed each one stripe
  /// by stripe with no order between them: one could overtake the other between two stripes,
  /// each then waited for the other's removal, and every later store operation (loads, saves)
  /// waited behind both forever. Found by the million-operation soak: models served at the save
  /// deadline were never saved.
  @Suite struct ConcurrentLogoutAllTests {
    @Test func concurrentLogoutAllsAllFinishTheirRemovals() async throws {
      let clock = ManualClock()  // never advanced: a removal that waits can only hang
      var configuration = AuthCoordinator.Configuration()
      configuration.clock = clock
      configuration.now = clock.dateSource
      let store = InMemoryTokenStore()
      let coordinator = AuthCoordinator(
        store: store,
        authorizer: ClosureAuthorizer { request in
          scaleModel(request.key.account, 1, expiresAt: clock.date.addingTimeInterval(3600))
        },
        configuration: configuration)
      let rounds = environmentInt("LOGOUT_ALL_ROUNDS", 300)
      let finished = LockedState(0)
      let signal = ChangeSignal()
      for round in 0..<rounds {
        let expected = (round + 1) * 4
        for _ in 0..<4 {
          Task.detached {
            await coordinator.accountStatusChanged(.logoutAll)
            finished.withLock { $0 += 1 }
            signal.changed()
          }
        }
        // Each logoutAll returns once its removal ran (the clock never moves, so a removal
        // that waits for a cycle never returns; the watchdog fails the test).
        try await signal.waitUntil { finished.withLock { $0 } >= expected }
      }
      // And the store order is not stuck: a request loads and authorizes.
      let key = AccountKey(account: "after")
      #expect(try await coordinator.authModel(for: key).mcUid == "after")
    }
  }
}
