import AuthCoordinatorOAuth2
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An API whose 401 carries a `WWW-Authenticate` challenge (with a realm, several at once)
/// answers the client at once: the 401 is the answer, the token is refreshed once and the
/// retry succeeds. On Linux a `Basic` challenge with a realm used to stall the call without
/// limit (swift-corelibs-foundation #5456).
@Suite(.timeLimit(.minutes(5))) struct BearerClientChallengeTests {
  @Test(arguments: [
    #"Bearer realm="api", error="invalid_token""#,
    #"Basic realm="api""#,
    #"Bearer realm="api", error="invalid_token", Basic realm="api""#,
  ])
  func aChallengedRejectionIsRefreshedAndRetriedAtOnce(_ challenge: String) async throws {
    let harness = try BearerHarness()
    try await harness.server.configure(["resource_challenge": challenge])
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: harness.server.baseURL,
      session: harness.session, deadline: .seconds(60))
    _ = try await client.data(from: harness.resource)
    try await harness.server.revokeAccessTokens()
    let started = ContinuousClock.now

    let (_, response) = try await client.data(from: harness.resource)

    #expect(response.statusCode == 200)
    // Real time is the property; a stall would end at the 60 s deadline.
    #expect(ContinuousClock.now - started < .seconds(30))
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 1)
    #expect(stats.resourceUnauthorized == 1)
  }

  @Test func aSecondChallengedRejectionIsReturnedAsItIs() async throws {
    let harness = try BearerHarness { request, model, server in
      if request.reason == .forcedRefresh { try await server.revokeAccessTokens() }
      return model
    }
    try await harness.server.configure(["resource_challenge": #"Basic realm="api""#])
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: harness.server.baseURL,
      session: harness.session, deadline: .seconds(60))
    _ = try await client.data(from: harness.resource)
    try await harness.server.revokeAccessTokens()

    let (data, response) = try await client.data(from: harness.resource)

    #expect(response.statusCode == 401)
    #expect(response.value(forHTTPHeaderField: "WWW-Authenticate") == #"Basic realm="api""#)
    #expect(String(decoding: data, as: UTF8.self).contains("invalid_token"))
    #expect(try await harness.server.stats().resourceUnauthorized == 2)
  }
}

/// RFC 6750 §3.1: `insufficient_scope` means the token is valid but does not grant the
/// request; a new token would not either, so the rejection is returned without a refresh.
@Suite(.timeLimit(.minutes(5))) struct BearerClientInsufficientScopeTests {
  @Test(arguments: [
    #"Bearer realm="api", error="insufficient_scope", scope="reports:write""#,
    #"Bearer error=insufficient_scope"#,
    #"Basic realm="api", Bearer realm="api", error="insufficient_scope""#,
  ])
  func anInsufficientScopeRejectionRefreshesNothing(_ challenge: String) async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    try await harness.server.configure(["resource_challenge": challenge])
    try await harness.server.revokeAccessTokens()

    let (_, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 401)
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 0)
    #expect(stats.resourceUnauthorized == 1)
  }

  /// `error="invalid_token"` next to a scope parameter still refreshes.
  @Test func anInvalidTokenRejectionStillRefreshes() async throws {
    let harness = try BearerHarness()
    _ = try await harness.client.data(from: harness.resource)
    try await harness.server.configure([
      "resource_challenge":
        #"Bearer realm="api", error="invalid_token", scope="insufficient_scope""#
    ])
    try await harness.server.revokeAccessTokens()

    let (_, response) = try await harness.client.data(from: harness.resource)

    #expect(response.statusCode == 200)
    #expect(try await harness.server.stats().refreshes == 1)
  }
}
