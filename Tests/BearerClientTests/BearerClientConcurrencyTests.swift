import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// 2,000 requests started together through one client, against the real server over a real
/// URLSession. Serialized: each test is a load on the machine's two cores by itself.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct BearerClientConcurrencyTests {
  static let requestCount = 2_000

  /// The access token is revoked at the server once 200 requests have succeeded: the requests
  /// still in flight with it get a 401, and all of them reject the same token, so the
  /// coordinator runs one refresh-token grant and every request ends 200 after its one retry.
  ///
  /// The server revokes by itself, as it answers the 200th (`revoke_access_after`): a client
  /// that revoked from its own 200th answer saw no 401 at all under ThreadSanitizer, its answers
  /// read only after the server had answered all 2,000.
  @Test func revocationMidRunCausesOneRefreshAndNoFailures() async throws {
    let harness = try BearerHarness()
    let server = harness.server
    // One token first, so that the 2,000 start on a cache hit and the refresh is the only grant.
    let (_, warm) = try await harness.client.data(from: harness.resource)
    #expect(warm.statusCode == 200)
    try await server.configure(["revoke_access_after": "201"])

    let (statuses, elapsed) = try await harness.concurrentRequests(Self.requestCount)

    let stats = try await server.stats()
    print("2,000 requests with a revocation mid-run: \(elapsed); server: \(stats)")
    #expect(statuses.count == Self.requestCount)
    #expect(
      statuses.allSatisfy { $0 == 200 },
      "statuses: \(Dictionary(grouping: statuses) { $0 }.mapValues(\.count))")
    #expect(stats.refreshes == 1)
    #expect(stats.reuses == 0)
    #expect(stats.issued == 2)
    #expect(stats.accessRevocations == 1)
    // The revocation really hit requests in flight: they got a 401 and were retried once.
    #expect(stats.resourceUnauthorized > 0)
    #expect(stats.resourceOK == Self.requestCount + 1)
  }

  /// No token yet: 2,000 requests started together share one client-credentials grant.
  @Test func coldStartWithTwoThousandRequestsGrantsOnce() async throws {
    let harness = try BearerHarness()
    let (statuses, elapsed) = try await harness.concurrentRequests(Self.requestCount)

    let stats = try await harness.server.stats()
    print("2,000 requests from a cold start: \(elapsed); server: \(stats)")
    #expect(statuses.count == Self.requestCount)
    #expect(statuses.allSatisfy { $0 == 200 })
    #expect(stats.issued == 1)
    #expect(stats.grants["client_credentials"] == 1)
    #expect(stats.refreshes == 0)
    #expect(stats.resourceOK == Self.requestCount)
    #expect(stats.resourceUnauthorized == 0)
  }
}
