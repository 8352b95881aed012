import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Discovery (issue 37, part 5): an authorizer made from an issuer reads the loopback server's
/// metadata document (RFC 8414, OpenID Connect discovery), keeps it, and sends its token and
/// revocation requests where it says.
@Suite(.timeLimit(.minutes(1))) struct DiscoveryTests {
  static let secret = "s3:cr&t"

  /// A metadata document; `{base}` is the server's own `http://127.0.0.1:<port>`.
  static func document(
    issuer: String = "{base}", methods: [String]? = ["client_secret_basic", "private_key_jwt"],
    revocation: Bool = true
  ) -> String {
    var fields = [#""issuer": "\#(issuer)""#, #""token_endpoint": "{base}/token""#]
    if revocation { fields.append(#""revocation_endpoint": "{base}/revoke""#) }
    if let methods {
      let names = methods.map { "\"\($0)\"" }.joined(separator: ", ")
      fields.append(#""token_endpoint_auth_methods_supported": [\#(names)]"#)
    }
    return "{" + fields.joined(separator: ", ") + "}"
  }

  /// A server that serves `document` at `paths` and requires the client's secret.
  static func server(
    document: String = document(), paths: String = "/.well-known/oauth-authorization-server"
  ) async throws -> RotatingTokenServer {
    let server = try RotatingTokenServer()
    try await server.configure([
      "metadata": document, "metadata_paths": paths, "client_id": "reports",
      "client_secret": secret,
    ])
    return server
  }

  static func authorizer(
    issuer: URL, authentication: OAuth2Authorizer.ClientAuthentication? = nil,
    transport: (any HTTPTransport)? = nil
  ) -> OAuth2Authorizer {
    var oauth = OAuth2Authorizer(
      issuer: issuer, clientID: "reports", clientSecret: secret,
      clientAuthentication: authentication, transport: transport)
    oauth.silentRefresh = nil  // no refresh-ahead timer in a coordinator's test
    return oauth
  }

  @Test func discoveryThenATokenThenARefreshReadTheMetadataOnce() async throws {
    let server = try await Self.server()
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.baseURL)
    #expect(oauth.issuer == server.baseURL)
    let first = try await oauth.authorize(request())
    let second = try await oauth.authorize(request(replacing: first))
    #expect(second.refreshToken != first.refreshToken)
    let metadata = try #require(try await oauth.metadata())
    #expect(metadata.tokenEndpoint == server.url("/token"))
    #expect(metadata.revocationEndpoint == server.url("/revoke"))
    let stats = try await server.stats()
    #expect(stats.metadataRequests == ["/.well-known/oauth-authorization-server"], "\(stats)")
    #expect(stats.requests == ["client_credentials": 1, "refresh_token": 1])
    #expect(stats.clientAuthentication == ["basic": 2])
  }

  @Test func anIssuerWithAPathFallsBackToTheOpenIDConfiguration() async throws {
    let server = try await Self.server(
      document: Self.document(issuer: "{base}/tenant"),
      paths: "/tenant/.well-known/openid-configuration")
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.url("/tenant"))
    let model = try await oauth.authorize(request())
    #expect(!model.accessToken.isEmpty)
    let stats = try await server.stats()
    // RFC 8414 §3.1 first (the well-known segment between host and path), then OpenID
    // Connect's (appended to the issuer) after its 404.
    #expect(
      stats.metadataRequests == [
        "/.well-known/oauth-authorization-server/tenant",
        "/tenant/.well-known/openid-configuration",
      ])
    #expect(stats.grants == ["client_credentials": 1])
  }

  @Test func metadataNamingAnotherIssuerIsRefusedAndNothingIsSent() async throws {
    let server = try await Self.server(document: Self.document(issuer: "https://evil.example"))
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.baseURL)
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .issuerMismatch)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("https://evil.example") == true, "\(String(describing: error))")
    #expect(try await server.stats().tokenPosts == 0)
  }

  @Test func anUnreachableMetadataEndpointFailsTransientlyThenRecovers() async throws {
    let server = try await Self.server()
    defer { server.stop() }
    // The first metadata request gets a dropped connection, the second a 503.
    try await server.configure(["metadata_fail_count": "1", "metadata_fail_status": "0"])
    let oauth = Self.authorizer(issuer: server.baseURL)
    let dropped = await coordinatorError { try await oauth.authorize(request()) }
    #expect(dropped?.code == .discoveryFailed)
    #expect(dropped?.isTransient == true, "\(String(describing: dropped))")
    try await server.configure(["metadata_fail_count": "1", "metadata_fail_status": "503"])
    let unavailable = await coordinatorError { try await oauth.authorize(request()) }
    #expect(unavailable?.code == .discoveryFailed)
    #expect(unavailable?.isTransient == true)
    #expect(try await server.stats().tokenPosts == 0)
    // A failure is not kept: the next request reads the metadata again, and gets its token.
    let model = try await oauth.authorize(request())
    #expect(!model.accessToken.isEmpty)
    _ = try await oauth.authorize(request(replacing: model))
    let stats = try await server.stats()
    #expect(stats.metadataRequests.count == 3, "\(stats.metadataRequests)")
    #expect(stats.tokenPosts == 2)
  }

  @Test func aSignOutRevokesAtTheMetadatasRevocationEndpoint() async throws {
    let server = try await Self.server()
    defer { server.stop() }
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = ManualClock()
    configuration.revocationTimeout = .seconds(5)
    let oauth = Self.authorizer(issuer: server.baseURL)
    #expect(oauth.revokesOnSignOut, "not known yet: the metadata may name one")
    let coordinator = AuthCoordinator(authorizer: oauth, configuration: configuration)
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    await coordinator.invalidate(account: serviceKey.account)
    let event = try await recorder.first {
      if case .signOutRevocation = $0 { return true }
      return false
    }
    #expect(event == .signOutRevocation(key: serviceKey, outcome: .revoked))
    let stats = try await server.stats()
    #expect(stats.revocations.map(\.token) == [model.refreshToken])
    #expect(stats.metadataRequests.count == 1)
    #expect(try await server.isActive(model.accessToken) == false)
  }

  @Test func metadataWithoutARevocationEndpointRevokesNothing() async throws {
    let server = try await Self.server(document: Self.document(revocation: false))
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.baseURL)
    _ = try await oauth.authorize(request())
    #expect(oauth.revokesOnSignOut == false)
  }

  @Test func aClientAuthenticationTheServerDoesNotListIsRefusedBeforeAnyTokenRequest()
    async throws
  {
    let server = try await Self.server(document: Self.document(methods: ["private_key_jwt"]))
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.baseURL)
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .unsupportedClientAuthentication)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("client_secret_basic") == true)
    #expect(!(error?.message.contains(Self.secret) ?? true))
    // Absent, the list means client_secret_basic alone (RFC 8414 §2): `post` is refused.
    try await server.configure(["metadata": Self.document(methods: nil)])
    let post = Self.authorizer(issuer: server.baseURL, authentication: .post)
    #expect(
      await coordinatorError { try await post.authorize(request()) }?.code
        == .unsupportedClientAuthentication)
    _ = try await Self.authorizer(issuer: server.baseURL).authorize(request())
    #expect(try await server.stats().tokenPosts == 1)
  }

  @Test func concurrentRequestsShareOneMetadataRead() async throws {
    let server = try await Self.server()
    defer { server.stop() }
    let oauth = Self.authorizer(issuer: server.baseURL)
    try await withThrowingTaskGroup(of: URL?.self) { group in
      for _ in 0..<50 { group.addTask { try await oauth.metadata()?.tokenEndpoint } }
      for try await endpoint in group { #expect(endpoint == server.url("/token")) }
    }
    #expect(try await server.stats().metadataRequests.count == 1)
  }

  @Test func anHTTPEndpointOfAnHTTPSIssuerIsRefused() async throws {
    let issuer = URL(string: "https://auth.example.com")!
    let documents = DocumentTransport(
      #"{"issuer": "https://auth.example.com", "token_endpoint": "http://auth.example.com/token"}"#
    )
    let oauth = Self.authorizer(issuer: issuer, transport: documents)
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .discoveryFailed)
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("not https") == true, "\(String(describing: error))")
    #expect(
      documents.requested == ["https://auth.example.com/.well-known/oauth-authorization-server"])
  }

  @Test func anHTTPIssuerOffLoopbackIsRefusedUnread() async throws {
    let documents = DocumentTransport("{}")
    let oauth = Self.authorizer(
      issuer: URL(string: "http://auth.example.com")!, transport: documents)
    let error = await coordinatorError { try await oauth.authorize(request()) }
    #expect(error?.code == .discoveryFailed)
    #expect(error?.isTransient == false)
    #expect(documents.requested.isEmpty)
  }
}

/// Answers every request 200 with one document, and lists the URLs asked.
final class DocumentTransport: HTTPTransport, @unchecked Sendable {
  private let lock = NSLock()
  private var urls: [String] = []
  let document: String

  init(_ document: String) { self.document = document }

  var requested: [String] { lock.withLock { urls } }

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let url = try #require(request.urlRequest.url)
    lock.withLock { urls.append(url.absoluteString) }
    let response = try #require(
      HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:]))
    return .complete(response, Data(document.utf8))
  }
}
