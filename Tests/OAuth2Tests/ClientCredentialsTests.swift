import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// The client credentials grant and the three client authentication methods, against the
/// simulated token endpoint, which counts the method each request used.
@Suite(.timeLimit(.minutes(1))) struct ClientCredentialsTests {
  /// A secret with every character RFC 6749 §2.3.1's form-urlencoding must protect in Basic.
  static let secret = "s3:cr&t+/ =%x"

  @Test func basicAuthenticationGetsATokenAndTheModelCarriesTheReply() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    try await server.configure(expiresIn: 1800)
    let date = TestDate()
    let oauth = authorizer(
      server, secret: Self.secret, authentication: .basic, now: date.source)
    let model = try await oauth.authorize(request())
    #expect(model.accessToken.hasPrefix("at-1-"))
    #expect(model.refreshToken?.hasPrefix("rt-1-") == true)
    #expect(model.mcUid == serviceKey.account)
    #expect(model.uid == "2088000000000001")  // the reply's user_id
    #expect(model.expiresAt == date.date.addingTimeInterval(1800))
    #expect(model.extraInfo["token_type"] == "Bearer")
    let stats = try await server.stats()
    #expect(stats.clientAuthentication == ["basic": 1])
    #expect(stats.grants == ["client_credentials": 1])
    #expect(stats.invalidClients == 0)
  }

  @Test func postAuthenticationSendsTheCredentialsInTheForm() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    let model = try await authorizer(server, secret: Self.secret, authentication: .post)
      .authorize(request())
    #expect(!model.accessToken.isEmpty)
    let stats = try await server.stats()
    #expect(stats.clientAuthentication == ["post": 1])
    #expect(stats.invalidClients == 0)
  }

  @Test func aPublicClientSendsNoSecret() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    // No secret: the default authentication is `none`.
    let oauth = authorizer(server)
    #expect(oauth.clientAuthentication == .none)
    _ = try await oauth.authorize(request())
    #expect(try await server.stats().clientAuthentication == ["none": 1])
  }

  @Test(arguments: [OAuth2Authorizer.ClientAuthentication.basic, .post])
  func aWrongSecretIsATerminalInvalidClient(
    _ method: OAuth2Authorizer.ClientAuthentication
  ) async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    let wrong = "not-the-secret-42"
    let oauth = authorizer(server, secret: wrong, authentication: method)
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .invalidClient)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("client authentication failed") == true)
    #expect(error.map { "\($0)".contains(wrong) } == false)
    let stats = try await server.stats()
    #expect(stats.invalidClients == 1)
    #expect(stats.clientAuthentication == [method.rawValue: 1])
  }

  @Test func aUserIDFieldOfAnotherNameOrAbsentGivesTheUID() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await script(
      server, status: 200, body: #"{"access_token":"at-x","sub":12345,"scope":"a b"}"#, count: 2)
    var oauth = authorizer(server)
    oauth.userIDField = "sub"
    let numbered = try await oauth.authorize(request())
    #expect(numbered.uid == "12345")
    #expect(numbered.extraInfo["scope"] == "a b")
    #expect(numbered.expiresAt == nil)  // no expires_in
    #expect(numbered.refreshToken == nil)
    oauth.userIDField = "user_id"
    #expect(try await oauth.authorize(request()).uid == "")
  }
}
