import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// The silent-refresh policy over a real socket (issue 24): the coordinator, OAuth2Authorizer
/// and URLSession against the python token server scripted to fail with a 5xx, a 429 with
/// `Retry-After`, or a dropped connection. The clock is the real one; the back-offs are short,
/// and every assertion is a count or a lower bound, never an upper bound on time.
@Suite(.timeLimit(.minutes(1))) struct SilentRefreshLoopbackTests {
  /// A coordinator on `server` with the recommended policy, back-offs from 50 ms.
  func coordinator(_ server: RotatingTokenServer, maxRetryWait: Duration = .seconds(5))
    -> AuthCoordinator
  {
    var silent = SilentRefreshPolicy.recommended
    silent.retryDelay = .milliseconds(50)
    silent.maxRetryWait = maxRetryWait
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(20))
    configuration.silentRefresh = silent
    return AuthCoordinator(authorizer: authorizer(server), configuration: configuration)
  }

  @Test(arguments: [
    (503, #"{"error":"temporarily_unavailable"}"#),
    (502, "<html>bad gateway</html>"),
    (0, ""),  // the connection dropped without a reply
  ])
  func twoTransientFailuresAreRetriedAndTheCallersGetTheThirdAttemptsToken(
    status: Int, body: String
  ) async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(server, status: status, body: body, count: 2)
    let coordinator = coordinator(server)
    let models = try await withThrowingTaskGroup(of: AuthModel.self) { group in
      for _ in 0..<20 { group.addTask { try await coordinator.authModel(for: serviceKey) } }
      return try await group.reduce(into: []) { $0.append($1) }
    }
    #expect(Set(models.map(\.accessToken)).count == 1, "one token for all 20 callers")
    let stats = try await server.stats()
    #expect(stats.scriptedFailures == 2)
    #expect(stats.grants["client_credentials"] == 1, "one grant: no storm after the failures")
    #expect(coordinator.statistics.retriesScheduled == 2)
    #expect(coordinator.statistics.authorizationsStarted == 3, "three calls into the authorizer")
    #expect(coordinator.statistics.flightsStarted == 1, "all in one flight")
  }

  @Test func a429sRetryAfterIsWaitedOutInsideTheFlight() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure([
      "fail_count": "1", "fail_status": "429", "fail_body": #"{"error":"slow_down"}"#,
      "fail_retry_after": "1",
    ])
    let coordinator = coordinator(server)
    let events = coordinator.events
    let started = ContinuousClock.now
    let model = try await coordinator.authModel(for: serviceKey)
    #expect(!model.accessToken.isEmpty)
    // The server asked for a second: the retry waited at least that (a lower bound only).
    #expect(ContinuousClock.now - started >= .seconds(1))
    var scheduled: [Duration] = []
    for await event in events {
      if case .retryScheduled(_, _, let attempt, let delay, let code) = event {
        #expect(attempt == 2)
        #expect(code == .tokenEndpointError)
        scheduled.append(delay)
      }
      if case .flightSucceeded = event { break }
    }
    #expect(scheduled == [.seconds(1)])
    #expect(try await server.stats().scriptedFailures == 1)
  }

  @Test func aRetryAfterLongerThanAFlightWaitsFailsAtOnceAndTheKeyCoolsDown() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure([
      "fail_count": "1", "fail_status": "503", "fail_body": "", "fail_retry_after": "30",
    ])
    let coordinator = coordinator(server, maxRetryWait: .seconds(5))
    let first = await coordinatorError { try await coordinator.authModel(for: serviceKey) }
    #expect(first?.code == .tokenEndpointError)
    #expect(first?.retryAfter == .seconds(30))
    // The next 50 callers are answered from the cooldown: no token request.
    for _ in 0..<50 {
      let again = await coordinatorError { try await coordinator.authModel(for: serviceKey) }
      #expect(again?.code == .tokenEndpointError)
      #expect((again?.retryAfter ?? .zero) > .seconds(25))
    }
    #expect(try await server.stats().scriptedFailures == 1)
    #expect(coordinator.statistics.failedFast == 50)
    #expect(coordinator.statistics.cooldownsEntered == 1)
  }

  @Test func invalidClientIsNeverRetriedAndIsRememberedForTheCooldown() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": "right"])
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(20))
    configuration.silentRefresh = .recommended
    configuration.silentRefresh.failureCooldown = .seconds(30)
    let coordinator = AuthCoordinator(
      authorizer: authorizer(server, secret: "wrong"), configuration: configuration)
    for _ in 0..<20 {
      let error = await coordinatorError { try await coordinator.authModel(for: serviceKey) }
      #expect(error?.code == .invalidClient)
    }
    #expect(try await server.stats().requests["client_credentials"] ?? 0 <= 1)
    #expect(coordinator.statistics.authorizationsStarted == 1, "one token request, not 20")
    #expect(coordinator.statistics.retriesScheduled == 0)
  }
}
