import Foundation
import RotatingTokenServer
import Testing

@testable import AuthCoordinatorOAuth2

/// The authorization code grant: the closure's code is exchanged once, with its redirect URI
/// and PKCE verifier. (The simulated server grants any code and does not echo the form, so the
/// fields sent are checked on the request the authorizer builds; the grant itself over HTTP.)
@Suite(.timeLimit(.minutes(1))) struct AuthorizationCodeTests {
  static let code = OAuth2Authorizer.AuthorizationCode(
    code: "code-Sg7&x", redirectURI: "https://app.example/callback",
    codeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")

  final class Calls: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    var count: Int { lock.withLock { value } }
    func add() { lock.withLock { value += 1 } }
  }

  @Test func theCodeIsExchangedWithItsRedirectURIAndVerifier() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let calls = Calls()
    let oauth = authorizer(
      server,
      grant: .authorizationCode { request in
        #expect(request.key == serviceKey)
        calls.add()
        return Self.code
      })
    let model = try await oauth.authorize(request())
    #expect(model.refreshToken != nil)
    #expect(calls.count == 1)
    let stats = try await server.stats()
    #expect(stats.grants == ["authorization_code": 1])
    #expect(stats.clientAuthentication == ["none": 1])
  }

  @Test func theFormCarriesTheCodeRedirectURIVerifierAndClientID() async throws {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "app",
      scope: "ignored-for-codes", parameters: ["resource": "r1", "code": "not-this-one"])
    let items = oauth.formItems(.authorizationCode(Self.code))
    let names = items.map(\.0)
    #expect(
      names == ["resource", "grant_type", "code", "redirect_uri", "code_verifier", "client_id"])
    let form = Dictionary(items, uniquingKeysWith: { first, _ in first })
    #expect(form["grant_type"] == "authorization_code")
    #expect(form["code"] == Self.code.code)
    #expect(form["redirect_uri"] == Self.code.redirectURI)
    #expect(form["code_verifier"] == Self.code.codeVerifier)
    let body = String(
      decoding: try await oauth.makeRequest(.authorizationCode(Self.code)).0.httpBody ?? Data(),
      as: UTF8.self)
    #expect(body.contains("code=code-Sg7%26x"))
    #expect(body.contains("code_verifier=\(Self.code.codeVerifier!)"))
  }

  @Test func basicCredentialsAreFormURLEncodedBeforeBase64() async throws {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "a:b",
      clientSecret: "p w+")
    let header = try await oauth.makeRequest(.clientCredentials).0
      .value(forHTTPHeaderField: "Authorization")
    let encoded = try #require(header?.dropFirst("Basic ".count))
    let decoded = String(
      decoding: try #require(Data(base64Encoded: String(encoded))), as: UTF8.self)
    #expect(decoded == "a%3Ab:p%20w%2B")
    #expect(oauth.formItems(.clientCredentials).map(\.0) == ["grant_type"])
  }

  @Test func withoutInteractionTheCodeIsNotAskedFor() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let calls = Calls()
    let oauth = authorizer(
      server,
      grant: .authorizationCode { _ in
        calls.add()
        return Self.code
      })
    let error = await coordinatorError { try await oauth.authorize(request(interactive: false)) }
    #expect(error?.code == .interactionRequired)
    #expect(calls.count == 0)
    #expect(try await server.stats().requests.isEmpty)
  }

  @Test func aRefusedRefreshDoesNotFallBackToTheCodeGrantByDefault() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let calls = Calls()
    let oauth = authorizer(
      server,
      grant: .authorizationCode { _ in
        calls.add()
        return Self.code
      })
    #expect(oauth.fallbackOnInvalidGrant == false)
    let error = await coordinatorError {
      try await oauth.authorize(request(replacing: expiredModel(refreshToken: "rt-gone")))
    }
    #expect(error?.code == .invalidGrant)
    #expect(calls.count == 0)
  }
}
