import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

extension ConcurrencySuites {
  /// Rule 4 and rule 7 at the scale where the Swift 6.3 task-group trap bites: when many
  /// children of one `TaskGroup` finish out of arrival order, the group's cleanup is quadratic
  /// (swiftlang/swift#71212). The coordinator resumes waiters in arrival order, so this test
  /// finishes in seconds; with out-of-order wake-ups it would take minutes and hit the limit.
  ///
  /// `FANIN_CALLERS` and `FANIN_CANCELLERS` scale it down (the sanitizer run does).
  @Suite struct FanInTests {
    @Test(.timeLimit(.minutes(3)))
    func oneAuthorizationServesOneGroupOfCallersWhileAnotherGroupCancels() async throws {
      let staying = environmentInt("FANIN_CALLERS", 100_000)
      let leaving = environmentInt("FANIN_CANCELLERS", staying / 2)
      let clock = ManualClock()
      let authorizer = ScriptedAuthorizer()
      var configuration = AuthCoordinator.Configuration()
      configuration.clock = clock
      configuration.now = clock.dateSource
      let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
      let events = EventRecorder(coordinator)
      let key = AccountKey(account: "fan-in")
      let model = scaleModel("fan-in", 1)
      let began = ContinuousClock.now
      // Runs both groups, so that the test can await their children parking (which emits no
      // event): a tracked group's children are tracked too.
      let callers = CallerTracker(watchdog: .seconds(120))

      // One group: every child waits for the one authorization.
      let served = callers.task {
        await withTaskGroup(of: Bool.self) { group in
          for _ in 0..<staying {
            group.addTask { (try? await coordinator.authModel(for: key)) == model }
          }
          var count = 0
          for await gotModel in group where gotModel { count += 1 }
          return count
        }
      }
      let call = await authorizer.nextCall()
      try await callers.waitUntil { coordinator.statistics.waitingCallers == staying }
      let parked = secondsSince(began)

      // A second group joins the same flight, then is cancelled while parked.
      let cancelled = callers.task {
        await withTaskGroup(of: Bool.self) { group in
          for _ in 0..<leaving {
            group.addTask {
              do {
                _ = try await coordinator.authModel(for: key)
                return false
              } catch {
                return error is CancellationError
              }
            }
          }
          var count = 0
          for await wasCancelled in group where wasCancelled { count += 1 }
          return count
        }
      }
      try await callers.waitUntil {
        coordinator.statistics.waitingCallers == staying + leaving
      }
      let cancelStart = ContinuousClock.now
      cancelled.cancel()
      let cancelledCount = await cancelled.value
      let cancelSeconds = secondsSince(cancelStart)
      #expect(cancelledCount == leaving)
      #expect(coordinator.statistics.waitingCallers == staying)
      #expect(coordinator.statistics.callersLeftEarly == leaving)
      #expect(!call.isCancelled, "the flight goes on for the callers that stayed")

      let wakeStart = ContinuousClock.now
      call.succeed(with: model)
      let servedCount = await served.value
      let wakeSeconds = secondsSince(wakeStart)

      try await flightsEnded(coordinator, events)
      let stats = coordinator.statistics
      #expect(servedCount == staying)
      #expect(authorizer.callCount == 1)
      #expect(stats.authorizationsStarted == 1)
      #expect(stats.flightsStarted == 1 && stats.flightsSucceeded == 1)
      #expect(stats.waitingCallers == 0 && stats.flightsInProgress == 0)
      print(
        "FanIn: \(staying) callers in one group + \(leaving) cancelled: parked in "
          + String(format: "%.2f s, ", parked)
          + String(format: "%.2f s to cancel %d, ", cancelSeconds, leaving)
          + String(format: "%.2f s from the model to the group's end, ", wakeSeconds)
          + String(format: "%.2f s in all; 1 authorization", secondsSince(began)))
    }
  }
}
