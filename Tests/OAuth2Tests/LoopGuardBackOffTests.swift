import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import RotatingTokenServer
import Testing

/// `OAuth2Authorizer` says whether it may involve a user, and a client-credentials one is silent:
/// a storm of rejected tokens makes the coordinator's refresh-loop guard wait between refreshes
/// instead of failing every caller with `refresh_loop`, as it did for the fourth revocation in
/// a minute before (issue 13). Real HTTP to the rotating token server; the back-off runs on a
/// manual clock, so nothing sleeps.
@Suite(.timeLimit(.minutes(1))) struct LoopGuardBackOffTests {
  @Test func aClientCredentialsAuthorizerIsSilentAndAnAuthorizationCodeOneIsNot() throws {
    let endpoint = try #require(URL(string: "https://auth.example.com/token"))
    #expect(!OAuth2Authorizer(tokenEndpoint: endpoint, clientID: "svc").isInteractive)
    let interactive = OAuth2Authorizer(
      tokenEndpoint: endpoint, clientID: "app",
      primaryGrant: .authorizationCode { _ in .init(code: "unused") })
    #expect(interactive.isInteractive)
  }

  @Test func aStormOfRejectedTokensBacksOffAndFailsNoCaller() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let clock = ManualClock()
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(20))
    configuration.clock = clock
    let coordinator = AuthCoordinator(
      authorizer: authorizer(server), configuration: configuration)
    var token = try await coordinator.authModel(for: serviceKey).accessToken
    var events = coordinator.events.makeAsyncIterator()
    var delays: [Duration] = []
    for round in 1...6 {
      // Fifty requests see the current token rejected (a revocation), as a bearer client's do.
      let rejected = token
      let callers = (0..<50).map { _ in
        Task {
          try await coordinator.authModel(for: serviceKey, refresh: .force(rejecting: rejected))
        }
      }
      if round > 3 {
        // Beyond three forced refreshes in the minute: the guard holds the refresh back.
        while let event = await events.next() {
          guard case .refreshLoopBackedOff(let key, let delay) = event else { continue }
          #expect(key == serviceKey)
          delays.append(delay)
          break
        }
        clock.advance(by: delays.last ?? .zero)
      }
      var tokens: Set<String> = []
      for caller in callers { tokens.insert(try await caller.value.accessToken) }
      #expect(tokens.count == 1, "round \(round): one refresh for all fifty")
      token = try #require(tokens.first)
      #expect(token != rejected)
    }
    #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
    #expect(coordinator.statistics.refreshLoopsStopped == 0)
    #expect(coordinator.statistics.refreshLoopBackoffs == 3)
    let stats = try await server.stats()
    #expect(stats.refreshes == 6)
    #expect(stats.reuses == 0)
  }
}
