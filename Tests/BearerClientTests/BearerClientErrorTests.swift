import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// What the client throws, and what it prints.
@Suite struct BearerClientErrorTests {
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

    let error = await #expect(throws: URLError.self) {
      try await harness.client.data(from: closed)
    }
    #expect(error?.code == .cannotConnectToHost)
    #expect(!"\(String(describing: error)) \(String(reflecting: error))".contains(token))
  }

  /// An answer that is not an HTTP response is an error with a stable code, without the token.
  @Test func aNonHTTPResponseIsAnErrorWithAStableCode() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    let token = try await harness.currentToken()
    let file = URL(string: "data:text/plain;base64,bm90IGh0dHA=")!

    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await harness.client.data(from: file)
    }
    #expect(error?.code == .nonHTTPResponse)
    #expect(error?.code.rawValue == "non_http_response")
    #expect(error?.isTransient == false)
    #expect(!"\(String(describing: error)) \(String(reflecting: error))".contains(token))
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
