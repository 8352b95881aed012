import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// A connection that breaks under a token request never holds the refresh for the whole
/// request timeout, and never delivers a token request without its body.
///
/// On Linux, swift-corelibs-foundation (libcurl) reuses a keep-alive connection for the next
/// request of a session; when the server resets that connection as the request goes out,
/// libcurl sends the request again on a new connection, and for a `POST` it sends it without
/// its body: the server waits for the body, the client for the answer, until the request's
/// timeout. The server here resets every token request that arrives on a connection that
/// already carried one (`reset_reused`), as a server or a load balancer that closes an idle
/// keep-alive connection just as it is reused; it counts the requests that came on a reused
/// connection and those whose body never came.
@Suite(.timeLimit(.minutes(2))) struct ConnectionResetTests {
  /// Longer than any of these requests should take, on a loaded machine too; a request that
  /// waits it out is the failure.
  let requestTimeout: Duration = .seconds(30)

  @Test func aRefreshAfterAnotherTokenRequestIsNeverSentOnItsConnection() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["reset_reused": "1"])
    let oauth = authorizer(server, timeout: requestTimeout, refreshTimeout: requestTimeout)
    let seeded = try await oauth.authorize(request())

    let started = ContinuousClock.now
    let outcome: Result<AuthModel, any Error>
    do {
      outcome = .success(try await oauth.authorize(request(replacing: seeded)))
    } catch {
      outcome = .failure(error)
    }
    let elapsed = ContinuousClock.now - started
    let stats = try await server.stats()

    // Half the timeout: a request that waited for an answer to a body-less replay takes all of
    // it.
    #expect(elapsed < requestTimeout / 2, "the refresh took \(elapsed)")
    #expect(stats.incompleteBodies == 0, "a token request arrived without its body: \(stats)")
    switch outcome {
    case .success(let model):
      #expect(model.refreshToken != seeded.refreshToken)
      #expect(stats.refreshes == 1)
    case .failure(let error):
      // A platform that does reuse the connection must fail at once, and retryably.
      let error = error as? AuthCoordinatorError
      #expect(error?.code == .networkError, "\(String(describing: error))")
      #expect(error?.isTransient == true)
    }
    #if canImport(FoundationNetworking)
      // On Linux a token request goes on a connection of its own.
      #expect(stats.reusedTokenPosts == 0, "\(stats)")
      #expect((try? outcome.get()) != nil, "the refresh failed: \(outcome)")
    #endif
    #expect(stats.reuses == 0)
  }

  @Test func aResetUnderARefreshIsRetriedAtOnceAndTheCallersGetTheToken() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let date = TestDate()
    let seeded = try await authorizer(server, now: date.source).authorize(request())
    // The next token request's connection is reset without an answer.
    try await script(server, status: -1, body: "")
    var silent = SilentRefreshPolicy.recommended
    silent.retryDelay = .milliseconds(50)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(60))
    configuration.silentRefresh = silent
    configuration.now = date.source
    let coordinator = AuthCoordinator(
      store: InMemoryTokenStore([serviceKey: seeded]),
      authorizer: authorizer(
        server, timeout: requestTimeout, refreshTimeout: requestTimeout, now: date.source),
      configuration: configuration)
    date.advance(by: 7200)  // the seeded model has expired: the callers wait for a refresh

    let started = ContinuousClock.now
    let model = try await coordinator.authModel(for: serviceKey)
    let elapsed = ContinuousClock.now - started

    #expect(model.refreshToken != seeded.refreshToken)
    #expect(elapsed < requestTimeout / 2, "the refresh took \(elapsed)")
    let stats = try await server.stats()
    #expect(stats.scriptedFailures == 1, "\(stats)")
    #expect(stats.refreshes == 1)
    #expect(stats.reuses == 0)
    #expect(stats.incompleteBodies == 0)
    #expect(coordinator.statistics.retriesScheduled == 1)
  }
}
