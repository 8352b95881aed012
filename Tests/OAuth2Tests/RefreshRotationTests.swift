import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// Refresh token grants against the simulated endpoint, which rotates refresh tokens and
/// revokes a family when a spent one comes back.
@Suite(.timeLimit(.minutes(2))) struct RefreshRotationTests {
  /// Wraps the authorizer to record, for each authorization, the refresh token it was handed
  /// and the one it returned.
  struct Recording: Authorizer {
    let inner: OAuth2Authorizer
    let log = Log()

    final class Log: @unchecked Sendable {
      private let lock = NSLock()
      private var entries: [(spent: String?, got: String?)] = []
      var all: [(spent: String?, got: String?)] { lock.withLock { entries } }
      func append(_ spent: String?, _ got: String?) {
        lock.withLock { entries.append((spent, got)) }
      }
    }

    func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
      let model = try await inner.authorize(request)
      log.append(request.replacing?.refreshToken, model.refreshToken)
      return model
    }
  }

  @Test func aCoordinatorRefreshesAcross100ExpiriesAndNeverReusesARefreshToken() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(expiresIn: 3600)
    let date = TestDate()
    let recording = Recording(inner: authorizer(server, now: date.source))
    var configuration = AuthCoordinator.Configuration()
    configuration.now = date.source
    let coordinator = AuthCoordinator(authorizer: recording, configuration: configuration)
    var model = try await coordinator.authModel(for: serviceKey)
    for _ in 0..<100 {
      date.advance(by: 3600)  // past expiresAt (and the 60 s leeway)
      let fresh = try await coordinator.authModel(for: serviceKey)
      #expect(fresh.accessToken != model.accessToken)
      #expect(fresh.refreshToken != model.refreshToken)
      model = fresh
    }
    let log = recording.log.all
    #expect(log.count == 101)
    #expect(log.first?.spent == nil)
    for index in 1..<log.count {
      // Each refresh spent exactly the refresh token the previous grant returned.
      #expect(log[index].spent == log[index - 1].got)
    }
    let stats = try await server.stats()
    #expect(stats.refreshes == 100)
    #expect(stats.families == 1)
    #expect(stats.reuses == 0)
    #expect(stats.invalidGrants == 0)
    #expect(try await server.isActive(model.accessToken))
  }

  @Test func aReplyWithoutARefreshTokenKeepsTheOldOne() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(
      server, status: 200,
      body: #"{"access_token":"at-plain","token_type":"bearer","expires_in":"120"}"#)
    let date = TestDate()
    let model = try await authorizer(server, now: date.source)
      .authorize(request(replacing: expiredModel(refreshToken: "rt-kept")))
    #expect(model.accessToken == "at-plain")
    #expect(model.refreshToken == "rt-kept")
    #expect(model.expiresAt == date.date.addingTimeInterval(120))  // a numeric string
  }

  @Test func invalidGrantFallsBackToClientCredentialsOnceWithANewFamily() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let model = try await authorizer(server)
      .authorize(request(replacing: expiredModel(refreshToken: "rt-unknown")))
    #expect(model.refreshToken?.hasPrefix("rt-1-") == true)
    let stats = try await server.stats()
    #expect(stats.requests == ["refresh_token": 1, "client_credentials": 1])
    #expect(stats.invalidGrants == 1)
    #expect(stats.families == 1)
    #expect(stats.reuses == 0)
  }

  @Test func invalidGrantWithoutFallbackIsTerminalAndSpendsTheTokenOnce() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let oauth = authorizer(server, fallback: false)
    let error = await coordinatorError {
      try await oauth.authorize(request(replacing: expiredModel(refreshToken: "rt-unknown")))
    }
    #expect(error?.code == .invalidGrant)
    #expect(error?.isTransient == false)
    let stats = try await server.stats()
    #expect(stats.requests == ["refresh_token": 1])
    #expect(stats.families == 0)
  }

  @Test func aReusedRefreshTokenIsRefusedAndTheFallbackStartsAFreshFamily() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let oauth = authorizer(server)
    let first = try await oauth.authorize(request())
    let second = try await oauth.authorize(request(replacing: first))
    #expect(second.refreshToken != first.refreshToken)
    // The spent token again (as a stale store would hand it): the server revokes family 1; the
    // fallback starts family 2, and the spent token is not sent a second time by the fallback.
    let third = try await oauth.authorize(request(replacing: first))
    #expect(third.refreshToken?.hasPrefix("rt-2-") == true)
    let stats = try await server.stats()
    #expect(stats.reuses == 1)
    #expect(stats.requests == ["client_credentials": 2, "refresh_token": 2])
  }
}
