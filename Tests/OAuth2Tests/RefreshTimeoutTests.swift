import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// The authorizer never cancels a refresh-token grant it has sent because of its own
/// `timeout`: a server that rotated and is slow to answer would have spent the refresh token,
/// and the next refresh would send the old one again (a reuse: the family is revoked). The
/// `timeout` still ends a client-credentials request; a refresh is bounded by
/// `refreshTimeout` (30 seconds by default, well within the coordinator's maximum hold).
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
    try await server.configure(["reply_delay": "30"])
    let oauth = authorizer(server, timeout: .milliseconds(250))
    let started = ContinuousClock.now
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .networkError)
    #expect(error?.isTransient == true)
    #expect(error?.message.contains("timed out") == true)
    // Real time is the property here: the answer would have come after 30 s (a margin wide
    // enough for a busy 2-core machine, where a 3 s delay and a 2.9 s bound once failed).
    #expect(ContinuousClock.now - started < .seconds(20))
  }

  @Test func aRefreshIsBoundedByRefreshTimeoutInstead() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let seeded = try await authorizer(server).authorize(request())
    try await server.configure(["reply_delay": "3"])
    let oauth = authorizer(server, timeout: .seconds(30), refreshTimeout: .milliseconds(250))
    #expect(oauth.refreshTimeout == .milliseconds(250))
    #expect(authorizer(server).refreshTimeout == .seconds(30))
    let error = await coordinatorError { try await oauth.authorize(request(replacing: seeded)) }
    #expect(error?.code == .networkError)
    #expect(
      error?.message.contains("refresh_token request to the token endpoint timed out") == true)
  }

  /// The coordinator abandons a refresh still running after its maximum hold (its result, if
  /// it ever comes, is discarded): the authorizer's own bound, for every attempt the silent
  /// refresh policy makes and the waits between them, must end first, or a rotation the
  /// server made is lost to the coordinator instead of the authorizer.
  @Test func theDefaultRefreshEndsWellWithinTheDefaultMaximumHold() {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example.com/oauth/token")!, clientID: "reports")
    let configuration = AuthCoordinator.Configuration()
    #expect(configuration.maximumHold == nil, "the default hold is derived")
    // The hold derived for a silent authorizer (Configuration.maximumHold's documentation).
    let hold = configuration.authorizationTimeout + configuration.storeTimeout * 2
    // One authorization: a refresh, then the primary grant when it was refused.
    let authorization = oauth.refreshTimeout + oauth.timeout
    #expect(oauth.longestAuthorization == authorization)
    var withoutFallback = oauth
    withoutFallback.fallbackOnInvalidGrant = false
    #expect(withoutFallback.longestAuthorization == oauth.refreshTimeout)
    let policy = oauth.silentRefresh ?? .disabled
    let flight =
      authorization * policy.maxAttempts + policy.maxRetryWait * (policy.maxAttempts - 1)
    #expect(oauth.refreshTimeout < hold, "refreshTimeout \(oauth.refreshTimeout), hold \(hold)")
    #expect(flight < hold, "a flight's attempts can take \(flight), the hold is \(hold)")
  }
}
