import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

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
}
