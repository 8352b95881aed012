import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// A grant the server narrowed stays refreshable (RFC 6749 §6: a refresh that omits `scope` is
/// granted the original grant's scope; one that asks for more is refused with `invalid_scope`).
/// An outside trial against Authlib found it: asked `read admin`, granted `read`, every refresh
/// re-sent `read admin` and was refused, so the token could never be refreshed.
@Suite(.timeLimit(.minutes(2))) struct NarrowedScopeTests {
  func narrowingServer() async throws -> RotatingTokenServer {
    let server = try RotatingTokenServer()
    try await server.configure(["grantable_scope": "read"])
    return server
  }

  @Test func aRefreshOfANarrowedGrantOmitsTheScopeAndSucceeds() async throws {
    let server = try await narrowingServer()
    defer { server.stop() }
    var oauth = authorizer(server)
    oauth.scope = "read admin"
    let first = try await oauth.authorize(request())
    #expect(first.extraInfo["scope"] == "read", "the server granted less than was asked")
    let second = try await oauth.authorize(request(replacing: first))
    #expect(second.refreshToken != first.refreshToken)
    #expect(second.extraInfo["scope"] == "read")
    let stats = try await server.stats()
    #expect(stats.invalidScopes == 0, "\(stats)")
    #expect(stats.refreshScopes == ["(omitted)": 1])
    #expect(stats.requests == ["client_credentials": 1, "refresh_token": 1])
    #expect(stats.families == 1)
  }

  @Test func aCoordinatorKeepsRefreshingANarrowedGrant() async throws {
    let server = try await narrowingServer()
    defer { server.stop() }
    try await server.configure(expiresIn: 3600)
    let date = TestDate()
    var oauth = authorizer(server, now: date.source)
    oauth.scope = "read admin"
    var configuration = AuthCoordinator.Configuration()
    configuration.now = date.source
    let coordinator = AuthCoordinator(authorizer: oauth, configuration: configuration)
    _ = try await coordinator.authModel(for: serviceKey)
    for _ in 0..<5 {
      date.advance(by: 3600)
      let model = try await coordinator.authModel(for: serviceKey)
      #expect(model.extraInfo["scope"] == "read")
    }
    let stats = try await server.stats()
    #expect(stats.refreshes == 5, "\(stats)")
    #expect(stats.invalidScopes == 0)
    #expect(stats.families == 1, "never a new client-credentials grant")
  }
}
