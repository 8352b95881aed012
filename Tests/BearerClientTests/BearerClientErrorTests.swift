import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What the client throws, and what it prints.
@Suite(.timeLimit(.minutes(2))) struct BearerClientErrorTests {
  /// The coordinator's error reaches the caller unchanged, and nothing is sent.
  @Test func theCoordinatorsErrorPropagatesUnchanged() async throws {
    let harness = try BearerHarness { _, _, _ in
      throw AuthCoordinatorError(.interactionRequired, "open the app", transient: true)
    }
    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await harness.client.data(from: harness.resource)
    }
    #expect(error?.code == .interactionRequired)
    #expect(error?.message == "open the app")
    #expect(error?.isTransient == true)
    let stats = try await harness.server.stats()
    #expect(stats.resourceOK + stats.resourceUnauthorized == 0)
  }

  /// A transport failure of the request itself is thrown as its `URLError`, without the token.
  @Test func aTransportFailurePropagatesAsAURLError() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    let token = try await harness.currentToken()
    // Nothing listens on port 1 of the loopback interface.
    let closed = URL(string: "http://127.0.0.1:1/resource")!
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: closed,
      session: harness.session)

    let error = await #expect(throws: URLError.self) {
      try await client.data(from: closed)
    }
    #expect(error?.code == .cannotConnectToHost)
    #expect(!"\(String(describing: error)) \(String(reflecting: error))".contains(token))
  }

  /// An answer that is not an HTTP response (here from a URL protocol of the session's
  /// configuration) is an error with a stable code, without the token.
  @Test func aNonHTTPResponseIsAnErrorWithAStableCode() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    let token = try await harness.currentToken()
    let plain = URL(string: "plain://files.example/report")!
    let configuration = URLSessionConfiguration.ephemeral
    configuration.protocolClasses = [PlainProtocol.self]
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: plain,
      session: URLSession(configuration: configuration))

    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await client.data(from: plain)
    }
    #expect(error?.code == .nonHTTPResponse)
    #expect(error?.code.rawValue == "non_http_response")
    #expect(error?.isTransient == false)
    #expect(!"\(String(describing: error)) \(String(reflecting: error))".contains(token))
  }

  /// A URL of another origin than the client's is refused before anything is sent, and no
  /// token is obtained for it.
  @Test(arguments: [
    "http://localhost:PORT/resource", "http://127.0.0.1:OTHER/resource",
    "https://127.0.0.1:PORT/resource", "data:text/plain;base64,bm90IGh0dHA=", "/resource",
  ])
  func aURLOfAnotherOriginIsRefusedWithAStableCode(_ pattern: String) async throws {
    let harness = try BearerHarness()
    let port = harness.server.port
    let text = pattern.replacingOccurrences(of: "PORT", with: "\(port)")
      .replacingOccurrences(of: "OTHER", with: "\(port == 65535 ? 1 : port + 1)")
    let url = try #require(URL(string: text))

    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await harness.client.data(from: url)
    }
    #expect(error?.code == .originMismatch)
    #expect(error?.code.rawValue == "origin_mismatch")
    #expect(error?.isTransient == false)
    #expect(error?.message.contains("http://127.0.0.1:\(port)") == true)
    let stats = try await harness.server.stats()
    #expect(stats.issued == 0)
    #expect(stats.resourceOK + stats.resourceUnauthorized == 0)
  }

  /// The client's description, debug description and reflection never show the token.
  @Test func theClientsDescriptionsContainNoToken() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    let token = try await harness.currentToken()

    var dumped = ""
    dump(harness.client, to: &dumped)
    let printed = [
      String(describing: harness.client), String(reflecting: harness.client), dumped,
      "\(Mirror(reflecting: harness.client).children.map { "\($0.label ?? ""): \($0.value)" })",
    ]
    for text in printed {
      #expect(!text.contains(token), "\(text)")
      #expect(text.contains("u1"))
    }
  }
}

/// Answers every `plain:` request with a `URLResponse` that is not an `HTTPURLResponse`.
final class PlainProtocol: URLProtocol {
  override class func canInit(with request: URLRequest) -> Bool { request.url?.scheme == "plain" }
  override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }
  override func startLoading() {
    let response = URLResponse(
      url: request.url!, mimeType: "text/plain", expectedContentLength: 5, textEncodingName: nil)
    client?.urlProtocol(self, didReceive: response, cacheStoragePolicy: .notAllowed)
    client?.urlProtocol(self, didLoad: Data("plain".utf8))
    client?.urlProtocolDidFinishLoading(self)
  }
  override func stopLoading() {}
}
