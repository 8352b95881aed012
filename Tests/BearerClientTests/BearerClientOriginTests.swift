import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The client sends its token only to its own origin: a redirect to another host or port is
/// followed without the token, a 401 from there refreshes nothing, and a same-origin redirect
/// keeps working.
@Suite(.timeLimit(.minutes(5))) struct BearerClientOriginTests {
  /// `/redirect` on `server`, sending the client on to `target`.
  static func redirect(at server: RotatingTokenServer, to target: String) -> URL {
    let escaped = target.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? target
    return server.url("/redirect?to=\(escaped)")
  }

  @Test func aSameOriginRedirectKeepsTheTokenAndItsRefresh() async throws {
    let harness = try BearerHarness()
    let moved = Self.redirect(at: harness.server, to: "/resource")

    let (_, first) = try await harness.client.data(from: moved)
    #expect(first.statusCode == 200)

    // A 401 at the end of a same-origin redirect is the API's own: it refreshes, once.
    try await harness.server.revokeAccessTokens()
    let (_, second) = try await harness.client.data(from: moved)
    #expect(second.statusCode == 200)

    let stats = try await harness.server.stats()
    #expect(stats.redirects == 3)
    #expect(stats.resourceOK == 2)
    #expect(stats.resourceUnauthorized == 1)
    #expect(stats.resourceNoToken == 0)
    #expect(stats.refreshes == 1)
  }

  @Test func aRedirectToAnotherHostLosesTheToken() async throws {
    let harness = try BearerHarness()
    // The same server under another name: the same port, another host, another origin.
    let elsewhere = Self.redirect(
      at: harness.server, to: "http://localhost:\(harness.server.port)/resource")

    let (_, response) = try await harness.client.data(from: elsewhere)

    #expect(response.statusCode == 401)
    #expect(response.url?.host == "localhost")
    let stats = try await harness.server.stats()
    #expect(stats.resourceNoToken == 1)
    #expect(stats.resourceOK == 0)
    // A 401 from another origin says nothing about the token: no refresh, no second send.
    #expect(stats.refreshes == 0)
    #expect(stats.redirects == 1)
  }

  @Test func aRedirectToAnotherPortLosesTheToken() async throws {
    let harness = try BearerHarness()
    let other = try RotatingTokenServer()
    defer { other.stop() }
    let elsewhere = Self.redirect(at: harness.server, to: other.url("/resource").absoluteString)

    let (_, response) = try await harness.client.data(from: elsewhere)

    #expect(response.statusCode == 401)
    let seen = try await other.stats()
    #expect(seen.resourceUnauthorized == 1)
    #expect(seen.resourceNoToken == 1)
    let stats = try await harness.server.stats()
    #expect(stats.refreshes == 0)
    #expect(stats.redirects == 1)
    #expect(stats.issued == 1)
  }
}
