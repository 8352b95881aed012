import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

extension ConcurrencySuites {
  /// A key's events come in the order of its decisions: a flight's start before its end, and a
  /// flight's end before the next flight of the key starts. The coordinator decides under the
  /// key's stripe lock and a flight's task may end it on another core as soon as the lock is
  /// released, so events emitted after releasing it could overtake each other; the first
  /// version of the striped core emitted `flightSucceeded` before `flightStarted` this way.
  @Suite struct EventOrderTests {
    @Test func eachKeysEventsFollowItsDecisions() async throws {
      // Few enough keys that a run's events (800) fit the subscription's buffer of 1,024 even
      // if the reader only runs at the end; many runs, for many races.
      let keys = 100
      let rounds = 3
      var violations: [String] = []
      for _ in 0..<environmentInt("EVENT_ORDER_RUNS", 20) {
        violations += try await oneRun(keys: keys, rounds: rounds)
      }
      #expect(
        violations.isEmpty, "\(violations.count) out of order, first: \(violations.prefix(3))")
    }

    private func oneRun(keys: Int, rounds: Int) async throws -> [String] {
      // A store that answers at once, so a cold flight ends as fast as it can.
      let store = InMemoryTokenStore()
      for index in 0..<keys {
        let key = AccountKey(account: "k\(index)")
        await store.save(scaleModel(key.account, 0, expiresAt: .distantFuture), for: key)
      }
      let authorizer = ClosureAuthorizer { request in
        scaleModel(request.key.account, 1, expiresAt: .distantFuture)
      }
      let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
      let log = LockedState<[AuthEvent]>([])
      let arrived = ChangeSignal()
      let subscription = coordinator.events
      let collector = Task {
        for await event in subscription {
          log.withLock { $0.append(event) }
          arrived.changed()
        }
      }
      defer { collector.cancel() }

      // Cold loads, then forced refreshes: each key has `rounds` flights, one after another.
      for round in 0..<rounds {
        try await withThrowingTaskGroup(of: Void.self) { group in
          for index in 0..<keys {
            group.addTask {
              let key = AccountKey(account: "k\(index)")
              let refresh: RefreshPolicy = round == 0 ? .ifNeeded : .force(rejecting: nil)
              _ = try await coordinator.authModel(for: key, refresh: refresh)
            }
          }
          try await group.waitForAll()
        }
      }
      // A start and an end per flight, and an authorizationStarted per forced refresh.
      let expected = keys * (2 + 3 * (rounds - 1))
      try await arrived.waitUntil { log.withLock { $0.count } >= expected }
      #expect(coordinator.statistics.flightsStarted == keys * rounds)

      var open: [AccountKey: UInt64] = [:]
      var violations: [String] = []
      for event in log.withLock({ $0 }) {
        switch event {
        case .flightStarted(let key, let flight):
          if let running = open[key] {
            violations.append("\(key): flight \(flight) started before \(running) ended")
          }
          open[key] = flight
        case .flightSucceeded(let key, let flight, _), .flightFailed(let key, let flight, _, _),
          .flightTimedOut(let key, let flight, _), .flightCancelled(let key, let flight, _):
          if open[key] != flight {
            violations.append(
              "\(key): flight \(flight) ended while \(String(describing: open[key])) ran")
          }
          open[key] = nil
        case .authorizationStarted(let key, let flight, _):
          if open[key] != flight {
            violations.append(
              "\(key): flight \(flight) authorizes while \(String(describing: open[key])) ran")
          }
        default:
          violations.append("unexpected event \(event)")
        }
      }
      return violations
    }
  }
}
