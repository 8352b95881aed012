import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// The authorizer never cancels a refresh-token grant it has sent because of its own
/// `timeout`: a server that rotated and is slow to answer would have spent the refresh token,
/// and the next refresh would send the old one again (a reuse: the family is revoked). The
/// `timeout` still ends a client-credentials request; a refresh is bounded by
/// `refreshTimeout` (15 minutes by default, far beyond the coordinator's deadlines).
///
/// The server answers 2 s after it rotated, against a `timeout` of 250 ms: the old 5 s timeout
/// and a 7 s answer, scaled down so the test does not wait 7 s.
@Suite(.timeLimit(.minutes(5))) struct RefreshTimeoutTests {
  @Test func aRefreshAnsweredAfterTheTimeoutIsKeptAndNeverSpentTwice() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let date = TestDate()
    let oauth = authorizer(server, timeout: .milliseconds(250), now: date.source)
    var configuration = AuthCoordinator.Configuration()
    configuration.now = date.source
    let coordinator = AuthCoordinator(authorizer: oauth, configuration: configuration)
    let first = try await coordinator.authModel(for: serviceKey)

    try await server.configure(["reply_delay": "2"])
    date.advance(by: 3600)
    let rotated = try await coordinator.authModel(for: serviceKey)
    #expect(rotated.refreshToken != first.refreshToken)

    try await server.configure(["reply_delay": "0"])
    date.advance(by: 3600)
    let next = try await coordinator.authModel(for: serviceKey)
    #expect(next.refreshToken != rotated.refreshToken)

    let stats = try await server.stats()
    #expect(stats.refreshes == 2)
    #expect(stats.reuses == 0)
    #expect(stats.families == 1)
    #expect(stats.aborted == 0)
    #expect(try await server.isActive(next.accessToken))
  }

  @Test func theTimeoutStillEndsAClientCredentialsRequest() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["reply_delay": "3"])
    let oauth = authorizer(server, timeout: .milliseconds(250))
    let started = ContinuousClock.now
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .networkError)
    #expect(error?.isTransient == true)
    #expect(error?.message.contains("timed out") == true)
    // Real time is the property here: the answer would have come after 3 s.
    #expect(ContinuousClock.now - started < .milliseconds(2900))
  }

  @Test func aRefreshIsBoundedByRefreshTimeoutInstead() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let seeded = try await authorizer(server).authorize(request())
    try await server.configure(["reply_delay": "3"])
    let oauth = authorizer(server, timeout: .seconds(30), refreshTimeout: .milliseconds(250))
    #expect(oauth.refreshTimeout == .milliseconds(250))
    #expect(authorizer(server).refreshTimeout == .seconds(900))
    let error = await coordinatorError { try await oauth.authorize(request(replacing: seeded)) }
    #expect(error?.code == .networkError)
    #expect(
      error?.message.contains("refresh_token request to the token endpoint timed out") == true)
  }
}
