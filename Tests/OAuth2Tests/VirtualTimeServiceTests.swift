import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

// SIMULATED SERVERS, REAL PRODUCTS, VIRTUAL TIME: the real coordinator, OAuth2Authorizer and
// BearerClient, whose transports are the TestKit's in-process token server and API
// (`SimulatedTokenServer`, `SimulatedResourceServer`), on a ManualClock. Nothing sleeps and no
// socket is opened; the request form, the grant choice, the reply's parsing, the token attached
// to its origin and the retry after a 401 are the products' own code.
@Suite(.timeLimit(.minutes(2))) struct VirtualTimeServiceTests {
  let clock = ManualClock()
  let tokenServer: SimulatedTokenServer
  let api: SimulatedResourceServer
  let coordinator: AuthCoordinator
  let client: BearerClient
  static let endpoint = URL(string: "https://auth.example.test/oauth/token")!
  static let reports = URL(string: "https://api.example.test/reports")!

  init() {
    tokenServer = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    api = SimulatedResourceServer(tokenServer: tokenServer)
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports", timeout: .seconds(5),
      transport: tokenServer, now: clock.dateSource)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    // The authorizer's own silent-refresh policy applies (`.recommended`); its jitter is
    // pinned at the middle: each back-off is three quarters of its nominal length.
    configuration.random = { 0.5 }
    coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
    client = BearerClient(
      coordinator: coordinator, key: AccountKey(account: "reports"), origin: Self.reports,
      transport: api, deadline: .seconds(600), clock: clock)
  }

  /// `count` concurrent calls; their statuses.
  func calls(_ count: Int) async throws -> [Int] {
    try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<count {
        group.addTask { [client] in try await client.data(from: Self.reports).1.statusCode }
      }
      return try await group.reduce(into: []) { $0.append($1) }
    }
  }

  @Test func callsShareOneGrantThenOneRotationPerExpiry() async throws {
    #expect(try await calls(50) == Array(repeating: 200, count: 50))
    #expect(tokenServer.counters.tokenRequests == 1)
    #expect(tokenServer.counters.clientCredentialsGrants == 1)
    for expiry in 1...3 {
      clock.advance(by: .seconds(3600))
      #expect(try await calls(50) == Array(repeating: 200, count: 50))
      #expect(tokenServer.counters.refreshTokenGrants == expiry, "one rotation per expiry")
    }
    #expect(tokenServer.counters.tokenRequests == 4)
    #expect(tokenServer.counters.reuses == 0)
    #expect(api.counters.unauthorized == 0)
  }

  @Test func aRevocationCostsEveryCallOne401AndAllOfThemOneRefresh() async throws {
    _ = try await calls(1)
    #expect(api.revokeAllAccessTokens() == 1)
    #expect(try await calls(40) == Array(repeating: 200, count: 40))
    #expect(api.counters.unauthorized == 40, "each call saw the revoked token once")
    #expect(tokenServer.counters.refreshTokenGrants == 1, "and all of them shared one refresh")
    #expect(tokenServer.counters.reuses == 0)
  }

  @Test func aTokenEndpointSlowerThanTheAuthorizersTimeoutIsRetriedThenFails() async throws {
    tokenServer.responseDelay = .seconds(30)
    let call = Task { [client] in try await client.data(from: Self.reports) }
    // Three attempts, each ended by the authorizer's own 5 s timeout, with back-offs of 0.75 s
    // and 1.5 s between them. Each step has three sleepers: the coordinator's deadline
    // scheduler, the client's deadline, and the token request or the back-off.
    for step in [Duration.seconds(5), .milliseconds(750), .seconds(5), .milliseconds(1500)] {
      await clock.waitForSleepers(3)
      clock.advance(by: step)
    }
    await clock.waitForSleepers(3)
    clock.advance(by: .seconds(5))
    let error = await #expect(throws: AuthCoordinatorError.self) { try await call.value }
    #expect(error?.code == .networkError, "the authorizer's own timeout, in virtual time")
    #expect(error?.isTransient == true)
    #expect(tokenServer.counters.tokenRequests == 3)
    #expect(coordinator.statistics.retriesScheduled == 2)
  }

  @Test func aRefreshTokenPresentedTwiceIsAReuseThatRevokesTheFamily() async throws {
    // The server's rule, through the real authorizer: the second refresh with the same token
    // is refused with invalid_grant, and the family's tokens stop working.
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports", fallbackOnInvalidGrant: false,
      transport: tokenServer, now: clock.dateSource)
    let key = AccountKey(account: "reports")
    let first = try await authorizer.authorize(
      AuthorizationRequest(key: key, reason: .missing, requestID: "1"))
    let rotated = try await authorizer.authorize(
      AuthorizationRequest(key: key, reason: .expired, requestID: "2", replacing: first))
    #expect(rotated.refreshToken != first.refreshToken)
    let reuse = await #expect(throws: AuthCoordinatorError.self) {
      try await authorizer.authorize(
        AuthorizationRequest(key: key, reason: .expired, requestID: "3", replacing: first))
    }
    #expect(reuse?.code == .invalidGrant)
    #expect(tokenServer.counters.reuses == 1)
    #expect(tokenServer.status(of: rotated.accessToken) == .revoked)
  }

  /// An authorization through the real authorizer, for its error.
  func authorizationError() async -> AuthCoordinatorError? {
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports", transport: tokenServer,
      now: clock.dateSource)
    return await #expect(throws: AuthCoordinatorError.self) {
      try await authorizer.authorize(
        AuthorizationRequest(key: AccountKey(account: "reports"), reason: .missing, requestID: "1"))
    }
  }

  @Test func aServerThatIsDownSaysWhenToComeBackAndTheCallersHearIt() async throws {
    tokenServer.outage = .init(status: 503, retryAfter: "7")
    let direct = await authorizationError()
    #expect(direct?.code == .tokenEndpointError)
    #expect(direct?.isTransient == true)
    #expect(direct?.retryAfter == .seconds(7))
    // Through the coordinator and the client, the callers get the same.
    let viaClient = await #expect(throws: AuthCoordinatorError.self) {
      try await client.data(from: Self.reports)
    }
    #expect(viaClient?.retryAfter == .seconds(7))
    #expect(tokenServer.counters.clientCredentialsGrants == 0, "no grant while it is down")
    let requests = tokenServer.counters.tokenRequests
    tokenServer.outage = nil
    // The key remembers the answer for the 7 s the server asked for: no token request.
    let remembered = await #expect(throws: AuthCoordinatorError.self) {
      try await client.data(from: Self.reports)
    }
    #expect(remembered?.retryAfter == .seconds(7))
    #expect(tokenServer.counters.tokenRequests == requests)
    clock.advance(by: .seconds(7))
    #expect(try await calls(3) == [200, 200, 200], "back up: the next call is served")
    #expect(tokenServer.counters.tokenRequests == requests + 1)
  }

  @Test func anHTTPDateRetryAfterIsMeasuredFromTheServersDate() async {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    tokenServer.outage = .init(
      status: 429, retryAfter: formatter.string(from: clock.date.addingTimeInterval(30)))
    #expect(await authorizationError()?.retryAfter == .seconds(30))
  }

  @Test(arguments: [("999999", Duration.seconds(3600)), ("soon", nil), ("-5", nil)])
  func aRetryAfterIsClampedToAnHourAndAnUnreadableOneIgnored(
    _ value: String, _ expected: Duration?
  ) async {
    tokenServer.outage = .init(status: 503, retryAfter: value, error: "temporarily_unavailable")
    let error = await authorizationError()
    #expect(error?.isTransient == true)
    #expect(error?.retryAfter == expected)
  }

  @Test func aTerminalRefusalCarriesNoRetryAfter() async {
    tokenServer.outage = .init(status: 400, retryAfter: "7", error: "invalid_client")
    let error = await authorizationError()
    #expect(error?.code == .invalidClient)
    #expect(error?.retryAfter == nil, "only a 429 or a 5xx says when to come back")
  }
}
