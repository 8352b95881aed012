import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One request at a time through the client, against the real server over a real URLSession.
@Suite(.timeLimit(.minutes(2))) struct BearerClientTests {
  /// The server sees the coordinator's token, which replaces the request's own header.
  @Test func attachesTheTokenInPlaceOfTheRequestsAuthorization() async throws {
    let harness = try BearerHarness()
    var request = URLRequest(url: harness.resource)
    request.setValue("Bearer not-a-token", forHTTPHeaderField: "Authorization")
    let (data, response) = try await harness.client.data(for: request)

    #expect(response.statusCode == 200)
    #expect(String(decoding: data, as: UTF8.self).contains("\"ok\": true"))
    let stats = try await harness.server.stats()
    #expect(stats.resourceOK == 1)
    #expect(stats.resourceUnauthorized == 0)
    #expect(stats.issued == 1)
  }

  /// Requests that are never rejected cause no refresh: the one token serves them all.
  @Test func requestsThatAreNeverRejectedCauseNoRefresh() async throws {
    let harness = try BearerHarness()
    let (statuses, _) = try await harness.concurrentRequests(50)
    for _ in 0..<5 {
      let (_, response) = try await harness.client.data(from: harness.resource)
      #expect(response.statusCode == 200)
    }

    #expect(statuses.allSatisfy { $0 == 200 })
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 0)
    #expect(stats.issued == 1)
    #expect(stats.resourceOK == 55)
    #expect(stats.resourceUnauthorized == 0)
  }

  /// A 401 causes exactly one refresh and one retry, which succeeds with the new token.
  @Test func aRejectedTokenIsRefreshedOnceAndTheRequestRetriedOnce() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    let rejected = try await harness.currentToken()
    try await harness.server.revokeAccessTokens()

    let (_, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 200)
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 1)
    #expect(stats.resourceUnauthorized == 1)
    #expect(stats.resourceOK == 2)
    #expect(try await harness.currentToken() != rejected)
  }

  /// The refreshed token is revoked too before the retry: the retry's 401 is returned as it is,
  /// with no second refresh and no third send.
  @Test func aSecond401AfterTheRefreshIsReturnedNotLooped() async throws {
    let harness = try BearerHarness { request, model, server in
      if request.reason == .forcedRefresh { try await server.revokeAccessTokens() }
      return model
    }
    _ = try await harness.client.data(from: harness.resource)
    try await harness.server.revokeAccessTokens()

    let (data, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 401)
    #expect(
      response.value(forHTTPHeaderField: "WWW-Authenticate")?.contains("invalid_token") == true)
    #expect(String(decoding: data, as: UTF8.self).contains("invalid_token"))
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 1)
    #expect(stats.issued == 2)
    #expect(stats.resourceUnauthorized == 2)
    #expect(stats.resourceOK == 1)
  }

  /// The forced refresh hands back the rejected token: the 401 is returned without a retry.
  @Test func aRefreshThatReturnsTheRejectedTokenIsNotRetried() async throws {
    let harness = try BearerHarness { request, model, _ in
      // The refresh happened at the server, but the model handed back is the old one.
      if request.reason == .forcedRefresh, let old = request.replacing { return old }
      return model
    }
    _ = try await harness.client.data(from: harness.resource)
    try await harness.server.revokeAccessTokens()

    let (_, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 401)
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 1)
    #expect(stats.resourceUnauthorized == 1)
    #expect(stats.resourceOK == 1)
  }

  /// A request with a body stream cannot be replayed: its rejection is returned, nothing
  /// refreshed. (The server answers a POST to /resource 404, which this client counts as a
  /// rejection; the same request with a `Data` body is refreshed and retried once.)
  @Test func aRequestWithABodyStreamIsNotRetried() async throws {
    let harness = try BearerHarness(rejectedStatuses: [404])
    var request = URLRequest(url: harness.resource)
    request.httpMethod = "POST"
    request.httpBodyStream = InputStream(data: Data("payload".utf8))
    // The server does not read a chunked body: the connection must not be reused after it.
    request.setValue("close", forHTTPHeaderField: "Connection")
    let (_, streamed) = try await harness.client.data(for: request)

    #expect(streamed.statusCode == 404)
    #expect(try await harness.server.stats().refreshes == 0)

    request.httpBodyStream = nil
    request.setValue(nil, forHTTPHeaderField: "Connection")
    request.httpBody = Data("payload".utf8)
    let (_, replayed) = try await harness.client.data(for: request)

    #expect(replayed.statusCode == 404)
    #expect(try await harness.server.stats().refreshes == 1)
  }

  /// Only the configured statuses count as a rejected token.
  @Test func aStatusOutsideRejectedStatusesIsReturnedAsItIs() async throws {
    let harness = try BearerHarness(rejectedStatuses: [403])
    _ = try await harness.client.data(from: harness.resource)
    try await harness.server.revokeAccessTokens()

    let (_, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 401)
    #expect(harness.client.rejectedStatuses == [403])
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 0)
    #expect(stats.resourceUnauthorized == 1)
  }
}
