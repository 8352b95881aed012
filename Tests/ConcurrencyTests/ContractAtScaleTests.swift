import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

extension ConcurrencySuites {
  /// Contract rules 1, 4, 5, 8 and 9 with many keys and callers at once, every step released by
  /// the test (scripted authorizer, manual clock, no sleeping).
  @Suite(.timeLimit(.minutes(3))) struct ContractAtScaleTests {
    struct Setup {
      let clock = ManualClock()
      let authorizer: ScriptedAuthorizer
      let coordinator: AuthCoordinator
      /// Runs the callers ``request(_:refresh:timeout:)`` starts, so that a test can await them
      /// parking: parking on a flight emits no event.
      let callers = CallerTracker()

      init(ignoresCancellation: Bool = false) {
        authorizer = ScriptedAuthorizer(ignoresCancellation: ignoresCancellation)
        var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
        configuration.clock = clock
        configuration.now = clock.dateSource
        coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
      }

      func request(
        _ key: AccountKey, refresh: RefreshPolicy = .ifNeeded, timeout: Duration? = nil
      ) -> Task<AuthModel, any Error> {
        let coordinator = self.coordinator
        return callers.task {
          try await coordinator.authModel(for: key, refresh: refresh, timeout: timeout)
        }
      }

      var stats: AuthCoordinator.Statistics { coordinator.statistics }

      /// Waits until `count` callers are parked on flights (all started by ``request``).
      func waitForWaiters(_ count: Int, fileID: String = #fileID, line: Int = #line)
        async throws
      {
        let coordinator = self.coordinator
        try await callers.waitUntil(fileID: fileID, line: line) {
          coordinator.statistics.waitingCallers == count
        }
      }
    }

    static let keys = (0..<1_000).map { AccountKey(account: "key\($0)") }

    /// Rules 1 and 4 across keys: 1,000 keys x 20 callers; all 1,000 authorizations are in
    /// flight together (keys proceed in parallel), each key gets exactly one.
    @Test func manyKeysInParallelEachGetExactlyOneAuthorization() async throws {
      let s = Setup()
      let events = EventRecorder(s.coordinator)
      var tasks: [(AccountKey, Task<AuthModel, any Error>)] = []
      for _ in 0..<20 {
        for key in Self.keys { tasks.append((key, s.request(key))) }
      }
      try await s.authorizer.waitForCalls(Self.keys.count)
      try await s.waitForWaiters(tasks.count)
      let calls = s.authorizer.calls
      #expect(calls.count == Self.keys.count)
      #expect(Set(calls.map(\.key)).count == Self.keys.count, "one authorization per key")
      for call in calls.reversed() {
        call.succeed(with: scaleModel(call.key.account, call.index))
      }
      for (key, task) in tasks {
        let model = try await task.value
        #expect(model.mcUid == key.account && model.accessToken.hasPrefix("tok|\(key.account)|"))
      }
      #expect(s.authorizer.callCount == Self.keys.count)
      try await flightsEnded(s.coordinator, events)
      #expect(s.stats.flightsSucceeded == Self.keys.count && s.stats.flightsInProgress == 0)
    }

    /// Rule 5 at scale: 10,000 forced refreshes of the same cached token (half naming it, half
    /// naming none while it is cached) cause exactly one authorization, and none gets it back.
    @Test func forcedRefreshStormCausesOneAuthorization() async throws {
      let s = Setup()
      let key = AccountKey(account: "storm")
      let first = s.request(key)
      let call = await s.authorizer.nextCall()
      call.succeed(with: scaleModel("storm", 0))
      let rejected = try await first.value.accessToken

      var tasks: [Task<AuthModel, any Error>] = []
      for index in 0..<10_000 {
        tasks.append(
          s.request(key, refresh: .force(rejecting: index.isMultiple(of: 2) ? rejected : nil)))
      }
      let second = await s.authorizer.nextCall()
      try await s.waitForWaiters(tasks.count)
      #expect(second.reason == .forcedRefresh)
      second.succeed(with: scaleModel("storm", 1))
      for task in tasks { #expect(try await task.value.accessToken == "tok|storm|1") }
      #expect(s.authorizer.callCount == 2)
    }

    /// Rule 8 at scale: per-caller timeouts leave only their callers; the deadline fails every
    /// flight, cancels every authorizer (which ignore it); new requests start new flights while
    /// the old authorizers still run; their late results are discarded.
    @Test func deadlinesAndLateResultsAcrossManyKeys() async throws {
      let s = Setup(ignoresCancellation: true)
      let keys = Array(Self.keys.prefix(200))
      var patient: [Task<AuthModel, any Error>] = []
      var hasty: [Task<AuthModel, any Error>] = []
      for key in keys {
        for index in 0..<10 {
          if index < 3 {
            hasty.append(s.request(key, timeout: .seconds(30)))
          } else {
            patient.append(s.request(key))
          }
        }
      }
      try await s.authorizer.waitForCalls(keys.count)
      try await s.waitForWaiters(patient.count + hasty.count)
      // One task sleeps until the earliest flight deadline (all flights share it here), and one
      // timeout timer per hasty caller.
      await s.clock.waitForSleepers(1 + hasty.count)
      let oldCalls = s.authorizer.calls

      s.clock.advance(by: .seconds(31))
      for task in hasty { await expectCode(task, .timedOut) }
      #expect(s.stats.callersLeftEarly == hasty.count)
      #expect(s.stats.flightsTimedOut == 0 && oldCalls.allSatisfy { !$0.isCancelled })

      s.clock.advance(by: .seconds(90))
      for task in patient { await expectCode(task, .timedOut) }
      #expect(s.stats.flightsTimedOut == keys.count)
      for call in oldCalls { await call.waitUntilCancelled() }

      // The abandoned authorizers are still running; new requests start new flights anyway.
      let fresh = keys.map { s.request($0) }
      try await s.authorizer.waitForCalls(2 * keys.count)
      let events = EventRecorder(s.coordinator)
      for call in oldCalls { call.succeed(with: scaleModel(call.key.account, -1)) }
      // Each discarded result emits `.lateResultDiscarded` after counting it.
      let coordinator = s.coordinator
      try await events.waitUntil {
        coordinator.statistics.lateResultsDiscarded == keys.count
      }
      for call in s.authorizer.calls.dropFirst(keys.count) {
        call.succeed(with: scaleModel(call.key.account, call.index))
      }
      for (key, task) in zip(keys, fresh) {
        let model = try await task.value
        #expect(model.mcUid == key.account && !model.accessToken.hasSuffix("|-1"))
      }
      try await flightsEnded(s.coordinator, events)
      #expect(s.stats.flightsInProgress == 0 && s.stats.waitingCallers == 0)
      #expect(flightsBalance(s.stats))
    }

    /// Rule 9 at scale: 500 keys with a flight and 10 waiters each; the authorizations complete
    /// while half the keys log out, all at once. Each waiter gets its key's model or
    /// `signedOut`; after its logout returned, a key never serves its old model again.
    @Test func logoutsRacingCompletionsAcrossManyKeys() async throws {
      let s = Setup(ignoresCancellation: true)
      let events = EventRecorder(s.coordinator)
      let keys = Array(Self.keys.prefix(500))
      var waiters: [(AccountKey, Task<AuthModel, any Error>)] = []
      for key in keys {
        for _ in 0..<10 { waiters.append((key, s.request(key))) }
      }
      try await s.authorizer.waitForCalls(keys.count)
      try await s.waitForWaiters(waiters.count)
      let firstCalls = s.authorizer.calls
      let loggingOut = Set(keys.enumerated().filter { $0.offset.isMultiple(of: 2) }.map(\.element))

      // Half the logouts race the completion; the other half follow a served waiter.
      let coordinator = s.coordinator
      let firstWaiter = Dictionary(waiters.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })
      await withTaskGroup(of: Void.self) { group in
        for (index, call) in firstCalls.enumerated() {
          group.addTask { call.succeed(with: scaleModel(call.key.account, index)) }
          guard loggingOut.contains(call.key) else { continue }
          let waiter = index.isMultiple(of: 4) ? nil : firstWaiter[call.key]
          group.addTask {
            _ = try? await waiter?.value
            await coordinator.accountStatusChanged(.logout(account: call.key.account))
          }
        }
      }
      // Every logout has returned: the old models of those keys are gone for good.
      var signedOut = 0
      for (key, task) in waiters {
        do {
          let model = try await task.value
          #expect(model.mcUid == key.account)
        } catch let error as AuthCoordinatorError {
          #expect(error.code == .signedOut && loggingOut.contains(key), "\(error)")
          signedOut += 1
        }
      }
      let oldTokens = Dictionary(
        uniqueKeysWithValues: firstCalls.enumerated().map {
          ($0.element.key, "tok|\($0.element.key.account)|\($0.offset)")
        })
      let after = keys.map { s.request($0) }
      try await s.authorizer.waitForCalls(keys.count + loggingOut.count)
      for call in s.authorizer.calls.dropFirst(keys.count) {
        #expect(loggingOut.contains(call.key), "only logged-out keys authorize again")
        call.succeed(with: scaleModel(call.key.account, 1_000_000 + call.index))
      }
      for (key, task) in zip(keys, after) {
        let token = try await task.value.accessToken
        if loggingOut.contains(key) {
          #expect(token != oldTokens[key], "\(key) served its pre-logout model")
        } else {
          #expect(token == oldTokens[key])
        }
      }
      print("LogoutRace: \(signedOut) of \(waiters.count) waiters signed out")
      #expect(signedOut <= waiters.count / 2)
      try await flightsEnded(s.coordinator, events)
      #expect(s.stats.flightsInProgress == 0 && s.stats.waitingCallers == 0)
      #expect(flightsBalance(s.stats))
    }
  }
}

/// Expects `task` to fail with an ``AuthCoordinatorError`` of `code`.
func expectCode(
  _ task: Task<AuthModel, any Error>, _ code: AuthCoordinatorError.Code,
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  do {
    let model = try await task.value
    Issue.record("expected \(code), got \(model)", sourceLocation: sourceLocation)
  } catch let error as AuthCoordinatorError {
    #expect(error.code == code, sourceLocation: sourceLocation)
  } catch {
    Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
  }
}
