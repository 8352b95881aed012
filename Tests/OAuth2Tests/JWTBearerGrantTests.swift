import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import AuthCoordinatorOAuth2

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The JWT bearer grant (RFC 7523 §2.1, issue 37) against the TestKit's SIMULATED token server:
/// an assertion the integrator's closure signs for every request, one-time at the server.
@Suite(.timeLimit(.minutes(1))) struct JWTBearerGrantTests {
  static let jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"
  static let endpoint = URL(string: "https://auth.example/token")!

  static func server(_ clock: ManualClock) -> SimulatedTokenServer {
    let server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    server.assertionValidator = { $0.hasPrefix("signed.") }
    return server
  }

  /// An authorizer whose closure signs `signed.<jti>.<account>` and records each request.
  static func authorizer(
    _ transport: any HTTPTransport, _ clock: ManualClock,
    asked: Recorded<OAuth2Authorizer.AssertionRequest>, endpoint: URL = endpoint
  ) -> OAuth2Authorizer {
    authorizer(transport, clock, endpoint: endpoint) { assertion, request in
      asked.append(assertion)
      return "signed.\(assertion.jti).\(request.key.account)"
    }
  }

  static func authorizer(
    _ transport: any HTTPTransport, _ clock: ManualClock, endpoint: URL = endpoint,
    assertion: @escaping OAuth2Authorizer.JWTBearerAssertionProvider
  ) -> OAuth2Authorizer {
    var oauth = OAuth2Authorizer(
      tokenEndpoint: endpoint, clientID: "orders-service", scope: "orders:read",
      primaryGrant: .jwtBearer(assertion: assertion), transport: transport,
      now: clock.dateSource)
    oauth.silentRefresh = nil
    return oauth
  }

  @Test func aThousandCallersMakeOneJWTBearerRequest() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let asked = Recorded<OAuth2Authorizer.AssertionRequest>()
    let oauth = Self.authorizer(server, clock, asked: asked)
    #expect(!oauth.isInteractive && oauth.fallbackOnInvalidGrant)
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = clock
    configuration.now = clock.dateSource
    let coordinator = AuthCoordinator(authorizer: oauth, configuration: configuration)
    let tokens = try await withThrowingTaskGroup(of: String.self) { group in
      for _ in 0..<1000 {
        group.addTask { try await coordinator.authModel(for: serviceKey).accessToken }
      }
      var tokens: Set<String> = []
      for try await token in group { tokens.insert(token) }
      return tokens
    }
    #expect(tokens.count == 1)
    let requests = asked.values
    #expect(requests.count == 1)
    #expect(requests.first?.audience == Self.endpoint && requests.first?.endpoint == Self.endpoint)
    #expect(requests.first?.clientID == "orders-service")
    #expect(requests.first?.issuedAt == clock.date)
    #expect(server.counters.requestsByGrantType == [Self.jwtBearerGrant: 1])
    #expect(server.counters.jwtBearerGrants == 1)
    #expect(server.assertions == requests.map { "signed.\($0.jti).\(serviceKey.account)" })
  }

  @Test func aRefreshUsesTheRefreshTokenAndARefusedOneGetsAFreshAssertion() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let asked = Recorded<OAuth2Authorizer.AssertionRequest>()
    let oauth = Self.authorizer(server, clock, asked: asked)
    let first = try await oauth.authorize(request())
    let refreshed = try await oauth.authorize(request(replacing: first))
    #expect(refreshed.refreshToken != first.refreshToken, "rotated")
    #expect(asked.values.count == 1, "a refresh sends the refresh token, no assertion")
    #expect(server.counters.refreshTokenGrants == 1)
    // The spent refresh token again: refused, then a new assertion, with a new jti.
    let fallback = try await oauth.authorize(request(replacing: first))
    #expect(server.counters.reuses == 1)
    #expect(server.counters.jwtBearerGrants == 2)
    let jtis = asked.values.map(\.jti)
    #expect(jtis.count == 2 && Set(jtis).count == 2)
    #expect(server.counters.replayedAssertions == 0)
    #expect(server.status(of: fallback.accessToken) == .active)
  }

  @Test func aReplayedAssertionIsRefusedTerminallyWithoutItsValue() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    // A closure that (wrongly) reuses its assertion: the server spends it once.
    let oauth = Self.authorizer(server, clock) { _, _ in "signed.static-assertion-55" }
    _ = try await oauth.authorize(request())
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .invalidGrant)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("refused the assertion of the jwt-bearer request") == true)
    #expect(!"\(String(describing: error))".contains("static-assertion-55"))
    #expect(server.counters.replayedAssertions == 1)
    // An assertion the server does not accept is refused the same way.
    let unsigned = Self.authorizer(server, clock) { assertion, _ in "unsigned.\(assertion.jti)" }
    #expect(
      await coordinatorError { try await unsigned.authorize(request()) }?.code == .invalidGrant)
    #expect(server.counters.jwtBearerGrants == 1)
  }

  @Test func aThrowingClosureFailsWithItsOwnCodeAndSendsNothing() async throws {
    struct SignerError: Error, CustomStringConvertible {
      var description: String { "private-key-pem-77" }
    }
    let clock = ManualClock()
    let server = Self.server(clock)
    let failing = Self.authorizer(server, clock) { _, _ in throw SignerError() }
    let error = await coordinatorError { try await failing.authorize(request()) }
    #expect(error?.code == .jwtBearerAssertionFailed)
    #expect(error?.isTransient == false)
    #expect(!"\(String(describing: error))".contains("private-key-pem-77"))
    let unreachable = Self.authorizer(server, clock) { _, _ in throw URLError(.timedOut) }
    let transient = await coordinatorError { try await unreachable.authorize(request()) }
    #expect(transient?.code == .jwtBearerAssertionFailed)
    #expect(transient?.isTransient == true)
    let empty = Self.authorizer(server, clock) { _, _ in "" }
    #expect(
      await coordinatorError { try await empty.authorize(request()) }?.code
        == .jwtBearerAssertionFailed)
    #expect(server.counters.tokenRequests == 0)
  }

  @Test func aRefreshAheadMayRunTheGrantAndTheFormCarriesTheScope() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let oauth = Self.authorizer(server, clock, asked: Recorded())
    let model = try await oauth.authorize(request(interactive: false))
    #expect(server.status(of: model.accessToken) == .active)
    let form = Dictionary(
      oauth.formItems(.jwtBearer("signed.x")), uniquingKeysWith: { first, _ in first })
    #expect(form["grant_type"] == Self.jwtBearerGrant)
    #expect(form["assertion"] == "signed.x" && form["scope"] == "orders:read")
  }

  @Test func overALoopbackSocketTheGrantAndItsRefreshGoThroughURLSession() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let http = LoopbackHTTPServer(handler: server.handle)
    let base = try http.start()
    defer { http.stop() }
    let endpoint = base.appendingPathComponent("token")
    let asked = Recorded<OAuth2Authorizer.AssertionRequest>()
    let session = URLSession(configuration: .ephemeral)
    defer { session.invalidateAndCancel() }
    var oauth = Self.authorizer(
      URLSessionTransport(session: session), clock, asked: asked, endpoint: endpoint)
    oauth.timeout = .seconds(30)
    let first = try await oauth.authorize(request())
    let second = try await oauth.authorize(request(replacing: first))
    #expect(second.refreshToken != first.refreshToken)
    #expect(asked.values.first?.audience == endpoint)
    #expect(
      server.counters.requestsByGrantType == [Self.jwtBearerGrant: 1, "refresh_token": 1])
  }
}
