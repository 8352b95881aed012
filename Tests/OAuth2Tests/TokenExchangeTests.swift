import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The token exchange grant (RFC 8693, issue 37) against the TestKit's SIMULATED token server,
/// in process on a manual clock: the real `OAuth2Authorizer` sends the exchange, the server
/// checks the subject token and starts a family with a rotating refresh token.
@Suite(.timeLimit(.minutes(1))) struct TokenExchangeTests {
  static let exchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
  static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
  static let upstream = "upstream-subject-7f3a"
  static let endpoint = URL(string: "https://auth.example/token")!

  /// A server on a manual clock that accepts ``upstream`` as a subject token.
  static func server(_ clock: ManualClock) -> SimulatedTokenServer {
    let server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    server.acceptedSubjectTokens = [upstream]
    return server
  }

  /// An authorizer of `grant` at `server`, without a refresh-ahead timer.
  static func authorizer(
    _ server: SimulatedTokenServer, _ clock: ManualClock, grant: OAuth2Authorizer.Grant
  ) -> OAuth2Authorizer {
    var oauth = OAuth2Authorizer(
      tokenEndpoint: endpoint, clientID: "orders-service", clientSecret: "client-secret-5",
      primaryGrant: grant, transport: server, now: clock.dateSource)
    oauth.silentRefresh = nil
    return oauth
  }

  static func coordinator(_ authorizer: any Authorizer, _ clock: ManualClock) -> AuthCoordinator {
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = clock
    configuration.now = clock.dateSource
    return AuthCoordinator(authorizer: authorizer, configuration: configuration)
  }

  /// A subject source that returns `token` and counts its calls.
  static func counted(
    _ calls: Recorded<String>, token: String = upstream,
    type: OAuth2Authorizer.SecurityToken.TokenType = .jwt
  ) -> OAuth2Authorizer.TokenSource {
    OAuth2Authorizer.TokenSource { request in
      calls.append(request.key.account)
      return .init(token: token, type: type)
    }
  }

  @Test func aThousandCallersMakeOneExchangeRequest() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let calls = Recorded<String>()
    let oauth = Self.authorizer(server, clock, grant: .tokenExchange(subject: Self.counted(calls)))
    #expect(!oauth.isInteractive)
    #expect(oauth.fallbackOnInvalidGrant, "a silent grant falls back by default")
    let coordinator = Self.coordinator(oauth, clock)
    let tokens = try await withThrowingTaskGroup(of: String.self) { group in
      for _ in 0..<1000 {
        group.addTask { try await coordinator.authModel(for: serviceKey).accessToken }
      }
      var tokens: Set<String> = []
      for try await token in group { tokens.insert(token) }
      return tokens
    }
    #expect(tokens.count == 1)
    #expect(calls.values == [serviceKey.account], "the subject source is asked once")
    let counters = server.counters
    #expect(counters.tokenRequests == 1)
    #expect(counters.requestsByGrantType == [Self.exchangeGrant: 1])
    #expect(counters.tokenExchangeGrants == 1)
    let sent = server.tokenExchanges
    #expect(sent.count == 1)
    #expect(sent.first?.subjectToken == Self.upstream)
    #expect(sent.first?.subjectTokenType == "urn:ietf:params:oauth:token-type:jwt")
    #expect(sent.first?.actorToken == nil && sent.first?.requestedTokenType == nil)
    let model = try await coordinator.authModel(for: serviceKey)
    #expect(model.extraInfo["issued_token_type"] == Self.accessTokenType)
    #expect(model.refreshToken != nil, "the exchange started a family with a refresh token")
  }

  @Test func theSubjectTokenComesFromAnotherKeyOfTheSameCoordinator() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let userKey = AccountKey(account: "orders-service", mode: "user")
    let ordersKey = AccountKey(account: "orders-service", mode: "orders")
    // The coordinator is made after its authorizer: the source finds it through a link.
    let link = CoordinatorLink()
    let user = Self.authorizer(server, clock, grant: .clientCredentials)
    var orders = Self.authorizer(
      server, clock, grant: .tokenExchange(subject: .accessToken(of: userKey) { link.coordinator }))
    orders.requests = ["orders": .init(scope: "orders:read", audience: "https://orders.example")]
    let router = ClosureAuthorizer(isInteractive: false) { [orders] request in
      try await (request.key.mode == "user" ? user : orders).authorize(request)
    }
    let coordinator = Self.coordinator(router, clock)
    link.coordinator = coordinator
    let exchanged = try await coordinator.authModel(for: ordersKey)
    let subject = try await coordinator.authModel(for: userKey)
    #expect(exchanged.accessToken != subject.accessToken)
    let counters = server.counters
    #expect(counters.tokenRequests == 2, "the subject's grant, then the exchange")
    #expect(counters.requestsByGrantType == ["client_credentials": 1, Self.exchangeGrant: 1])
    let sent = try #require(server.tokenExchanges.first)
    #expect(sent.subjectToken == subject.accessToken, "the user key's cached token")
    #expect(sent.subjectTokenType == Self.accessTokenType)
    #expect(sent.scope == "orders:read" && sent.audience == "https://orders.example")
    #expect(exchanged.extraInfo["issued_token_type"] == Self.accessTokenType)
  }

  @Test func oneAuthorizerServesTheSubjectAndTheExchangeThroughAModesOwnGrant() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let userKey = AccountKey(account: "orders-service", mode: "user")
    let ordersKey = AccountKey(account: "orders-service", mode: "orders")
    let link = CoordinatorLink()
    var oauth = Self.authorizer(server, clock, grant: .clientCredentials)
    oauth.requests = [
      "orders": .init(
        scope: "orders:read", audience: "https://orders.example",
        grant: .tokenExchange(subject: .accessToken(of: userKey) { link.coordinator }))
    ]
    let coordinator = Self.coordinator(oauth, clock)
    link.coordinator = coordinator
    let exchanged = try await coordinator.authModel(for: ordersKey)
    let subject = try await coordinator.authModel(for: userKey)
    #expect(
      server.counters.requestsByGrantType == ["client_credentials": 1, Self.exchangeGrant: 1])
    let sent = try #require(server.tokenExchanges.first)
    #expect(sent.subjectToken == subject.accessToken)
    #expect(sent.scope == "orders:read" && sent.audience == "https://orders.example")
    #expect(exchanged.extraInfo["issued_token_type"] == Self.accessTokenType)
    // The mode's grant shows its kind, never its closure, and two tables compare by kind.
    #expect(oauth.requests["orders"]?.description.contains("grant: tokenExchange") == true)
    #expect(
      oauth.requests["orders"] != .init(scope: "orders:read", audience: "https://orders.example"))
  }

  @Test func aSubjectFromTheRequestsOwnKeyIsRefusedAtOnce() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let link = CoordinatorLink()
    let oauth = Self.authorizer(
      server, clock,
      grant: .tokenExchange(subject: .accessToken(of: serviceKey) { link.coordinator }))
    let coordinator = Self.coordinator(oauth, clock)
    link.coordinator = coordinator
    // Through the coordinator: it would wait for its own flight; it fails instead.
    var caught: AuthCoordinatorError?
    do { _ = try await coordinator.authModel(for: serviceKey) } catch let error
      as AuthCoordinatorError
    {
      caught = error
    }
    #expect(caught?.code == .tokenExchangeSelfReference, "\(String(describing: caught))")
    #expect(caught?.isTransient == false)
    // The direct form (a coordinator already made) refuses the same way.
    let direct = Self.authorizer(
      server, clock, grant: .tokenExchange(subject: .accessToken(of: serviceKey, from: coordinator))
    )
    let error = await coordinatorError { try await direct.authorize(request()) }
    #expect(error?.code == .tokenExchangeSelfReference)
    #expect(server.counters.tokenRequests == 0)
  }

  @Test func aRefreshAfterExpiryUsesTheRefreshTokenNotANewExchange() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let calls = Recorded<String>()
    let oauth = Self.authorizer(server, clock, grant: .tokenExchange(subject: Self.counted(calls)))
    let coordinator = Self.coordinator(oauth, clock)
    let first = try await coordinator.authModel(for: serviceKey)
    clock.advance(by: .seconds(3601))
    let second = try await coordinator.authModel(for: serviceKey)
    #expect(second.accessToken != first.accessToken)
    #expect(second.refreshToken != first.refreshToken, "the refresh token rotated")
    let counters = server.counters
    #expect(counters.tokenExchangeGrants == 1)
    #expect(counters.refreshTokenGrants == 1)
    #expect(counters.reuses == 0)
    #expect(calls.values.count == 1, "no new subject token for a refresh")
  }

  @Test func aRefusedRefreshFallsBackToAFreshExchange() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let calls = Recorded<String>()
    let oauth = Self.authorizer(server, clock, grant: .tokenExchange(subject: Self.counted(calls)))
    let first = try await oauth.authorize(request())
    _ = try await oauth.authorize(request(replacing: first))
    // The first refresh token is spent: sending it again is refused (and revokes the family).
    let fallback = try await oauth.authorize(request(replacing: first))
    #expect(fallback.refreshToken != first.refreshToken)
    let counters = server.counters
    #expect(counters.reuses == 1)
    #expect(counters.tokenExchangeGrants == 2, "a new family from a fresh exchange")
    #expect(calls.values.count == 2, "the source was asked again")
    #expect(server.status(of: fallback.accessToken) == .active)
  }

  @Test func aRefusedSubjectTokenIsTerminalAndNamedWithoutItsValue() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let calls = Recorded<String>()
    let unknown = "unknown-subject-9c1e"
    let oauth = Self.authorizer(
      server, clock, grant: .tokenExchange(subject: Self.counted(calls, token: unknown)))
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .invalidGrant)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("refused the subject token of the token-exchange") == true)
    #expect(!"\(String(describing: error))".contains(unknown))
    // With an actor, the message cannot tell which of the two was refused.
    let withActor = Self.authorizer(
      server, clock,
      grant: .tokenExchange(
        subject: Self.counted(calls), actor: Self.counted(calls, token: unknown)))
    let actorError = await coordinatorError { try await withActor.authorize(request()) }
    #expect(actorError?.code == .invalidGrant)
    #expect(actorError?.message.contains("the subject or actor token") == true)
    #expect(!"\(String(describing: actorError))".contains(unknown))
  }

  @Test func aThrowingSourceFailsTheRequestWithItsOwnCode() async throws {
    struct KeyStoreError: Error, CustomStringConvertible {
      var description: String { "leaked-token-material-11" }
    }
    let clock = ManualClock()
    let server = Self.server(clock)
    let throwing = OAuth2Authorizer.TokenSource { _ in throw KeyStoreError() }
    let unreachable = OAuth2Authorizer.TokenSource { _ in throw URLError(.cannotConnectToHost) }
    let subject = await coordinatorError {
      try await Self.authorizer(server, clock, grant: .tokenExchange(subject: throwing))
        .authorize(request())
    }
    #expect(subject?.code == .subjectTokenFailed)
    #expect(subject?.isTransient == false)
    #expect(!"\(String(describing: subject))".contains("leaked-token-material-11"))
    let transient = await coordinatorError {
      try await Self.authorizer(server, clock, grant: .tokenExchange(subject: unreachable))
        .authorize(request())
    }
    #expect(transient?.code == .subjectTokenFailed)
    #expect(transient?.isTransient == true)
    let actor = await coordinatorError {
      try await Self.authorizer(
        server, clock, grant: .tokenExchange(subject: Self.counted(Recorded()), actor: throwing)
      ).authorize(request())
    }
    #expect(actor?.code == .actorTokenFailed)
    let empty = await coordinatorError {
      try await Self.authorizer(
        server, clock, grant: .tokenExchange(subject: Self.counted(Recorded(), token: ""))
      ).authorize(request())
    }
    #expect(empty?.code == .subjectTokenFailed)
    #expect(server.counters.tokenRequests == 0, "nothing was sent")
  }

  @Test func aRequestedTokenTypeIsSentAndAnotherIssuedTypeIsRefused() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    let jwt = OAuth2Authorizer.SecurityToken.TokenType.jwt
    let oauth = Self.authorizer(
      server, clock,
      grant: .tokenExchange(subject: Self.counted(Recorded()), requestedTokenType: jwt))
    let model = try await oauth.authorize(request())
    #expect(model.extraInfo["issued_token_type"] == jwt.rawValue)
    #expect(server.tokenExchanges.last?.requestedTokenType == jwt.rawValue)
    server.issuedTokenTypeOverride = "urn:ietf:params:oauth:token-type:id_token"
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .issuedTokenTypeMismatch)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("id_token") == true)
    // Without a requested type, whatever was issued is recorded, not checked (an ID token's
    // reply says token_type N_A).
    let any = Self.authorizer(
      server, clock, grant: .tokenExchange(subject: Self.counted(Recorded())))
    let idToken = try await any.authorize(request())
    #expect(idToken.extraInfo["issued_token_type"] == "urn:ietf:params:oauth:token-type:id_token")
    #expect(idToken.extraInfo["token_type"] == "N_A")
  }

  @Test func theActorTokenIsSentWithItsType() async throws {
    let clock = ManualClock()
    let server = Self.server(clock)
    server.acceptedSubjectTokens.insert("actor-token-d4")
    let oauth = Self.authorizer(
      server, clock,
      grant: .tokenExchange(
        subject: Self.counted(Recorded()),
        actor: Self.counted(Recorded(), token: "actor-token-d4", type: .accessToken)))
    // A refresh ahead allows no interaction: the exchange is silent and runs.
    _ = try await oauth.authorize(request(interactive: false))
    let sent = try #require(server.tokenExchanges.first)
    #expect(sent.actorToken == "actor-token-d4")
    #expect(sent.actorTokenType == Self.accessTokenType)
    #expect(sent.subjectToken == Self.upstream)
  }
}

/// Holds a coordinator weakly, for a token source made before it.
final class CoordinatorLink: @unchecked Sendable {
  private let lock = NSLock()
  private weak var stored: AuthCoordinator?

  var coordinator: AuthCoordinator? {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}
