import Foundation
import RotatingTokenServer
import Testing

@testable import AuthCoordinatorOAuth2

/// Client authentication as a choice (issue 37, part 2): secrets in Basic or the form carried
/// by the authentication itself, and client assertions an integrator's closure signs, against
/// the simulated token endpoint, which verifies each and refuses a replayed assertion.
@Suite(.timeLimit(.minutes(1))) struct ClientAuthenticationTests {
  static let secret = "s3:cr&t+/ =%x"
  static let jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

  @Test(arguments: ["basic", "post"])
  func aSecretAuthenticationCarriesItsOwnIDAndSecret(_ method: String) async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    let authentication: OAuth2Authorizer.ClientAuthentication =
      method == "basic"
      ? .clientSecretBasic(id: "reports", secret: Self.secret)
      : .clientSecretPost(id: "reports", secret: Self.secret)
    let oauth = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"), clientAuthentication: authentication)
    #expect(oauth.clientID == "reports")
    _ = try await oauth.authorize(request())
    let stats = try await server.stats()
    #expect(stats.clientAuthentication == [method: 1])
    #expect(stats.invalidClients == 0)
    // Neither the description nor a reflection shows the secret.
    var dumped = ""
    dump(oauth, to: &dumped)
    #expect(!"\(oauth)".contains(Self.secret) && !dumped.contains(Self.secret))
    #expect("\(oauth)".contains("secret: <redacted>"))
  }

  @Test func theAuthenticationsIDAndSecretWinOverTheAuthorizers() async throws {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "old",
      clientSecret: "old-secret",
      clientAuthentication: .clientSecretPost(id: "new", secret: "new-secret"))
    let form = Dictionary(
      oauth.formItems(.clientCredentials), uniquingKeysWith: { first, _ in first })
    #expect(form["client_id"] == "new")
    #expect(form["client_secret"] == "new-secret")
    let publicClient = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!,
      clientAuthentication: .none(clientID: "app"))
    #expect(publicClient.formItems(.clientCredentials).map(\.0) == ["grant_type", "client_id"])
    #expect(publicClient.formItems(.clientCredentials).last?.1 == "app")
  }

  @Test func privateKeyJWTSendsAFreshAssertionForEveryRequest() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_assertion": "signed."])
    let asked = Recorded<OAuth2Authorizer.AssertionRequest>()
    let date = TestDate()
    let endpoint = server.url("/token")
    let oauth = OAuth2Authorizer(
      tokenEndpoint: endpoint,
      clientAuthentication: .privateKeyJWT(clientID: "reports") { request in
        asked.append(request)
        return "signed.\(request.jti)"
      }, now: date.source)
    let first = try await oauth.authorize(request())
    // A refresh: a second request, a second assertion (the server refuses a replayed one).
    let second = try await oauth.authorize(request(replacing: first))
    #expect(second.refreshToken != first.refreshToken)
    let stats = try await server.stats()
    #expect(stats.clientAuthentication == ["assertion": 2])
    #expect(stats.grants == ["client_credentials": 1, "refresh_token": 1])
    #expect(stats.invalidClients == 0)
    let requests = asked.values
    #expect(requests.count == 2)
    #expect(Set(requests.map(\.jti)).count == 2)
    #expect(requests.allSatisfy { $0.audience == endpoint && $0.endpoint == endpoint })
    #expect(requests.allSatisfy { $0.clientID == "reports" && $0.issuedAt == date.date })
    #expect(stats.assertions == requests.map { "signed.\($0.jti)" })
  }

  @Test func theFormCarriesTheAssertionAndItsType() async throws {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!,
      clientAuthentication: .clientAssertion(clientID: "svc", type: "urn:example:spiffe") { _ in
        "workload-token"
      }, parameters: ["client_assertion": "not-this-one"])
    let (urlRequest, secrets) = try await oauth.makeRequest(.clientCredentials)
    let body = String(decoding: urlRequest.httpBody ?? Data(), as: UTF8.self)
    #expect(
      body
        == "grant_type=client_credentials&client_id=svc&client_assertion_type=urn%3Aexample%3Aspiffe"
        + "&client_assertion=workload-token")
    #expect(urlRequest.value(forHTTPHeaderField: "Authorization") == nil)
    #expect(secrets.contains("workload-token"))
  }

  @Test func anAssertionTheServerRefusesIsATerminalInvalidClientThatSaysSo() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_assertion": "signed."])
    let forged = "forged.eyJhbGciOiJub25lIn0"
    let oauth = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      clientAuthentication: .privateKeyJWT(clientID: "reports") { _ in forged })
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .invalidClient)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("refused the client assertion") == true)
    #expect(error.map { "\($0)".contains(forged) } == false)
    #expect(try await server.stats().invalidClients == 1)
    // A secret the server refuses says something else: the assertion is named only when sent.
    try await server.configure(["client_assertion": ""])
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    let secretError = await coordinatorError {
      try await authorizer(server, secret: "wrong", authentication: .basic).authorize(request())
    }
    #expect(secretError?.message.contains("client assertion") == false)
  }

  @Test func aReplayedAssertionIsRefused() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_assertion": "signed."])
    // A closure that caches its assertion: the server sees the same one twice.
    let oauth = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      clientAuthentication: .privateKeyJWT(clientID: "reports") { _ in "signed.cached" })
    let model = try await oauth.authorize(request())
    let error = await coordinatorError { try await oauth.authorize(request(replacing: model)) }
    #expect(error?.code == .invalidClient)
    #expect(try await server.stats().assertions == ["signed.cached", "signed.cached"])
  }

  struct KeyVaultError: Error, CustomStringConvertible {
    var description: String { "key material: -----BEGIN PRIVATE KEY----- MIIE" }
  }

  @Test func aThrowingClosureFailsTheRequestBeforeItIsSent() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_assertion": "signed."])
    let unreachable = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      clientAuthentication: .privateKeyJWT(clientID: "reports") { _ in
        throw URLError(.cannotConnectToHost)
      })
    let transient = await coordinatorError { try await unreachable.authorize(request()) }
    #expect(transient?.code == .clientAssertionFailed)
    #expect(transient?.isTransient == true)
    let broken = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      clientAuthentication: .privateKeyJWT(clientID: "reports") { _ in throw KeyVaultError() })
    let terminal = await coordinatorError { try await broken.authorize(request()) }
    #expect(terminal?.code == .clientAssertionFailed)
    #expect(terminal?.isTransient == false)
    #expect(terminal.map { "\($0)".contains("PRIVATE KEY") } == false)
    #expect(terminal?.message.contains("KeyVaultError") == true)
    let empty = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      clientAuthentication: .privateKeyJWT(clientID: "reports") { _ in "" })
    #expect(await coordinatorError { try await empty.authorize(request()) }?.isTransient == false)
    #expect(try await server.stats().tokenPosts == 0)
  }
}

/// Values a `@Sendable` closure records, for the test to read.
final class Recorded<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: [Value] = []

  func append(_ value: Value) { lock.withLock { stored.append(value) } }

  var values: [Value] { lock.withLock { stored } }
}
