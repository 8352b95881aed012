import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Nothing the authorizer prints (its description, its reflection, its errors) contains the
/// client secret, a token, a code or a verifier, and server text is sanitised.
@Suite(.timeLimit(.minutes(1))) struct RedactionTests {
  static let secret = "client-secret-Q7"

  @Test func theAuthorizerPrintsNoSecret() throws {
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://user:pw@auth.example/token?key=k-123#frag")!,
      clientID: "reports", clientSecret: Self.secret, scope: "read",
      parameters: ["audience": "aud-value-9"])
    var dumped = ""
    dump(oauth, to: &dumped)
    for text in [String(describing: oauth), String(reflecting: oauth), dumped] {
      #expect(!text.contains(Self.secret))
      #expect(!text.contains("k-123"))
      #expect(!text.contains("pw@"))
      #expect(!text.contains("aud-value-9"))
      #expect(text.contains("reports"))
    }
    #expect(String(describing: oauth).contains("clientSecret: <redacted>"))
    #expect(String(describing: oauth).contains("parameters: [\"audience\"]"))
  }

  @Test func anAuthorizationCodePrintsNeitherCodeNorVerifier() {
    let code = OAuth2Authorizer.AuthorizationCode(
      code: "code-abc", redirectURI: "https://app.example/cb", codeVerifier: "verifier-xyz")
    var dumped = ""
    dump(code, to: &dumped)
    for text in [String(describing: code), dumped] {
      #expect(!text.contains("code-abc"))
      #expect(!text.contains("verifier-xyz"))
      #expect(text.contains("https://app.example/cb"))
    }
  }

  @Test func errorsAreSanitisedAndCarryNoSecret() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let refreshToken = "rt-secret-0042"
    // A hostile description: the refresh token, the client secret, a keyed access token, a
    // control character and a long tail.
    let description =
      "bad \(refreshToken) for \(Self.secret), access_token=at-leak-1 \u{7}bell "
      + String(repeating: "z", count: 500)
    let body = String(
      decoding: try JSONSerialization.data(withJSONObject: [
        "error": "invalid_request", "error_description": description,
      ]), as: UTF8.self)
    try await script(server, status: 400, body: body)
    let oauth = authorizer(server, secret: Self.secret, authentication: .post, fallback: false)
    let error = await coordinatorError {
      try await oauth.authorize(request(replacing: expiredModel(refreshToken: refreshToken)))
    }
    #expect(error?.code == .invalidRequest)
    var dumped = ""
    dump(error, to: &dumped)
    for text in [error.map { "\($0)" } ?? "", dumped] {
      #expect(!text.contains(refreshToken))
      #expect(!text.contains(Self.secret))
      #expect(!text.contains("at-leak-1"))
      #expect(!text.contains("\u{7}"))
      #expect(text.contains("bad <redacted>"))
    }
    let message = error?.message ?? ""
    #expect(message.count < 320)
    #expect(message.hasSuffix("...)"))
  }

  @Test func aSecurityTokenAndAnExchangeAuthorizerPrintNoToken() {
    let token = OAuth2Authorizer.SecurityToken(token: "subject-secret-31", type: .idToken)
    var dumped = ""
    dump(token, to: &dumped)
    for text in [String(describing: token), String(reflecting: token), dumped] {
      #expect(!text.contains("subject-secret-31"))
      #expect(text.contains("urn:ietf:params:oauth:token-type:id_token"))
    }
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "svc",
      primaryGrant: .tokenExchange(
        subject: .init { _ in token }, requestedTokenType: .accessToken))
    #expect(String(describing: oauth).contains("primaryGrant: tokenExchange"))
    let bearer = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "svc",
      primaryGrant: .jwtBearer { _, _ in "assertion-secret-32" })
    #expect(String(describing: bearer).contains("primaryGrant: jwtBearer"))
  }

  @Test(arguments: ["exchange", "jwt-bearer"])
  func aServerEchoingTheSubjectTokenOrAssertionIsRedacted(_ grant: String) async throws {
    let subject = "subject-secret-41"
    let actor = "actor-secret-42"
    let assertion = "assertion-secret-43"
    let primary: OAuth2Authorizer.Grant =
      grant == "exchange"
      ? .tokenExchange(
        subject: .init { _ in .init(token: subject, type: .jwt) },
        actor: .init { _ in .init(token: actor, type: .accessToken) })
      : .jwtBearer { _, _ in assertion }
    let oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!, clientID: "svc",
      clientSecret: Self.secret, primaryGrant: primary, transport: EchoingTokenEndpoint())
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .invalidGrant)
    var dumped = ""
    dump(error, to: &dumped)
    for text in [error.map { "\($0)" } ?? "", dumped] {
      for secret in [subject, actor, assertion, Self.secret] { #expect(!text.contains(secret)) }
      #expect(text.contains("<redacted>"), "the echo is there, redacted")
    }
  }
}

/// A token endpoint that refuses every grant with `invalid_grant` and echoes the form's values
/// (a subject token, an assertion) in its `error_description`, as a careless server might.
struct EchoingTokenEndpoint: HTTPTransport {
  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let body = String(decoding: request.urlRequest.httpBody ?? Data(), as: UTF8.self)
    let values = body.split(separator: "&").compactMap { $0.split(separator: "=").last }
      .map { $0.removingPercentEncoding ?? "" }
    let reply = try JSONSerialization.data(withJSONObject: [
      "error": "invalid_grant", "error_description": "refused " + values.joined(separator: " "),
    ])
    let response = HTTPURLResponse(
      url: request.urlRequest.url!, statusCode: 400, httpVersion: "HTTP/1.1",
      headerFields: ["Content-Type": "application/json"])!
    return .complete(response, reply)
  }
}
