import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import RotatingTokenServer
import Testing

/// Requests keyed by what they ask for (issue 37, part 1): one authorizer serves a token per
/// mode, each with its own scope, audience and resource indicators (RFC 8707), and the
/// coordinator caches, coalesces and refreshes each key on its own.
@Suite(.timeLimit(.minutes(1))) struct KeyedRequestsTests {
  static let reportsAPI = URL(string: "https://reports.example.com/api")!
  static let reports = AccountKey(account: "reports-service", mode: "reports")
  static let billing = AccountKey(account: "reports-service", mode: "billing")

  static func authorizer(_ server: RotatingTokenServer) -> OAuth2Authorizer {
    var oauth = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"), clientID: "reports", scope: "default:read",
      parameters: ["tenant": "t0"])
    oauth.requests = [
      "reports": .init(scope: "reports:read", resources: [reportsAPI]),
      "billing": .init(
        scope: "invoices:read invoices:write", audience: "https://billing.example.com",
        parameters: ["tenant": "t1"]),
    ]
    oauth.silentRefresh = nil  // no refresh-ahead timer
    return oauth
  }

  static func coordinator(_ server: RotatingTokenServer) -> AuthCoordinator {
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = ManualClock()
    return AuthCoordinator(authorizer: authorizer(server), configuration: configuration)
  }

  static let reportsForm = RotatingTokenServer.Stats.TokenForm(
    grantType: "client_credentials", scope: "reports:read", resources: [reportsAPI.absoluteString])
  static let billingForm = RotatingTokenServer.Stats.TokenForm(
    grantType: "client_credentials", scope: "invoices:read invoices:write",
    audience: "https://billing.example.com")

  @Test func twoModesAskForTheirOwnTokensAndEachKeyIsCachedOnItsOwn() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let coordinator = Self.coordinator(server)
    let reports = try await coordinator.authModel(for: Self.reports)
    let billing = try await coordinator.authModel(for: Self.billing)
    #expect(reports.accessToken != billing.accessToken)
    #expect(reports.extraInfo["scope"] == "reports:read")
    #expect(billing.extraInfo["scope"] == "invoices:read invoices:write")
    // Cached per key: no more requests.
    #expect(try await coordinator.authModel(for: Self.reports) == reports)
    #expect(try await coordinator.authModel(for: Self.billing) == billing)
    let stats = try await server.stats()
    #expect(stats.tokenForms == [Self.reportsForm, Self.billingForm], "\(stats.tokenForms)")
    #expect(stats.families == 2)
  }

  @Test func aThousandCallersAcrossTwoModesMakeTwoTokenRequests() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let coordinator = Self.coordinator(server)
    let tokens = try await withThrowingTaskGroup(of: (AuthMode, String).self) { group in
      for index in 0..<1000 {
        let key = index.isMultiple(of: 2) ? Self.reports : Self.billing
        group.addTask { (key.mode, try await coordinator.authModel(for: key).accessToken) }
      }
      var tokens: [AuthMode: Set<String>] = [:]
      for try await (mode, token) in group { tokens[mode, default: []].insert(token) }
      return tokens
    }
    #expect(tokens["reports"]?.count == 1)
    #expect(tokens["billing"]?.count == 1)
    #expect(tokens["reports"] != tokens["billing"])
    let stats = try await server.stats()
    #expect(stats.tokenPosts == 2, "\(stats)")
    #expect(Set(stats.tokenForms.map(\.scope)) == ["reports:read", "invoices:read invoices:write"])
  }

  @Test func aRefreshResendsTheResourceAndAudienceNotTheScopeAndLeavesTheOtherModeAlone()
    async throws
  {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let coordinator = Self.coordinator(server)
    let reports = try await coordinator.authModel(for: Self.reports)
    let billing = try await coordinator.authModel(for: Self.billing)
    let refreshed = try await coordinator.authModel(
      for: Self.reports, refresh: .force(rejecting: reports.accessToken))
    #expect(refreshed.accessToken != reports.accessToken)
    #expect(refreshed.extraInfo["scope"] == "reports:read")
    // The other mode's token is untouched, in the cache and at the server.
    #expect(try await coordinator.authModel(for: Self.billing) == billing)
    #expect(try await server.isActive(billing.accessToken))
    _ = try await coordinator.authModel(
      for: Self.billing, refresh: .force(rejecting: billing.accessToken))
    let stats = try await server.stats()
    #expect(stats.refreshes == 2)
    #expect(
      Array(stats.tokenForms.dropFirst(2)) == [
        .init(grantType: "refresh_token", resources: [Self.reportsAPI.absoluteString]),
        .init(grantType: "refresh_token", audience: "https://billing.example.com"),
      ], "\(stats.tokenForms)")
  }

  @Test func aModeNotInTheTableAsksWithTheAuthorizersOwnScope() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let coordinator = Self.coordinator(server)
    let model = try await coordinator.authModel(for: AccountKey(account: "reports-service"))
    #expect(model.extraInfo["scope"] == "default:read")
    let stats = try await server.stats()
    #expect(stats.tokenForms == [.init(grantType: "client_credentials", scope: "default:read")])
  }

  @Test func aGrantNarrowerThanTheModeAskedIsRefusedNamingTheMissingScopes() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["grantable_scope": "invoices:read reports:read"])
    let coordinator = Self.coordinator(server)
    do {
      let model = try await coordinator.authModel(for: Self.billing)
      Issue.record("a token granted without invoices:write was served: \(model)")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .scopeNotGranted)
      #expect(!error.isTransient)
      #expect(error.message.contains("without invoices:write"), "\(error.message)")
    }
    // The other mode was granted all it asked for.
    #expect(try await coordinator.authModel(for: Self.reports).extraInfo["scope"] == "reports:read")
    // The authorizer's own scope (no table entry) is recorded, not checked.
    var unkeyed = Self.authorizer(server)
    unkeyed.scope = "reports:read reports:admin"
    let model = try await unkeyed.authorize(request())
    #expect(model.extraInfo["scope"] == "reports:read")
  }
}
