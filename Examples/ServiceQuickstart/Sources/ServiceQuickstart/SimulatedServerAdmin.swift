import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The SIMULATED token server's admin routes: Tests/Support/RotatingTokenServer's
/// `/config`, `/revoke-access` and `/stats`, which no real authorization server has. The
/// scenario uses them to script the server (token lifetime, a slow endpoint, a key rotation
/// that revokes every access token) and to count what it saw. The quick start itself never
/// calls them.
struct SimulatedServerAdmin: Sendable {
  /// What the simulated server counted (`GET /stats`).
  struct Stats: Decodable, Sendable {
    /// Token requests received, by grant type.
    var requests: [String: Int]
    /// Successful grants, by grant type.
    var grants: [String: Int]
    /// Successful refresh-token grants.
    var refreshes: Int
    /// Refresh tokens that came back after they were spent.
    var reuses: Int
    /// Token families revoked because of a reuse.
    var revokedFamilies: Int
    /// Token requests whose client authentication failed.
    var invalidClients: Int
    /// `/resource` requests answered 200, and answered 401.
    var resourceOK: Int
    var resourceUnauthorized: Int
    /// Calls of `/revoke-access`.
    var accessRevocations: Int
    /// Token requests the server is holding now.
    var inFlight: Int

    /// Every token request, whatever its grant and its answer.
    var tokenRequests: Int { requests.values.reduce(0, +) }
    /// Client-credentials grants: each starts a new token family.
    var clientCredentialsGrants: Int { grants["client_credentials"] ?? 0 }

    enum CodingKeys: String, CodingKey {
      case requests, grants, refreshes, reuses
      case revokedFamilies = "revoked_families"
      case invalidClients = "invalid_clients"
      case resourceOK = "resource_ok"
      case resourceUnauthorized = "resource_unauthorized"
      case accessRevocations = "access_revocations"
      case inFlight = "in_flight"
    }
  }

  /// The server's base URL, `http://127.0.0.1:<port>`.
  let base: URL
  /// A session of its own, so that the admin requests never queue behind the client's.
  private let session = URLSession(configuration: .ephemeral)

  init(base: URL) { self.base = base }

  /// The simulated server's token endpoint (the quick start's `tokenEndpoint`).
  var tokenEndpoint: URL { base.appending(path: "token") }
  /// The simulated server's protected resource (answers 401 to a revoked token).
  var resource: URL { base.appending(path: "resource") }

  /// Sets `/config` values: `delay` (seconds before a token answer), `expires_in` (whole
  /// seconds), `client_id` and `client_secret` (required from then on).
  func configure(_ settings: KeyValuePairs<String, String>) async throws {
    var parts = URLComponents(url: base.appending(path: "config"), resolvingAgainstBaseURL: false)!
    parts.queryItems = settings.map { URLQueryItem(name: $0.key, value: $0.value) }
    _ = try await get(parts.url!)
  }

  /// Revokes every access token issued so far (`/revoke-access`), as a resource server's key
  /// rotation would; their refresh tokens stay valid.
  func revokeAccessTokens() async throws {
    _ = try await get(base.appending(path: "revoke-access"))
  }

  /// The server's counts (`/stats`).
  func stats() async throws -> Stats {
    try JSONDecoder().decode(Stats.self, from: try await get(base.appending(path: "stats")))
  }

  /// `GET url`; a failure names the path only (a `/config` query holds the client secret).
  private func get(_ url: URL) async throws -> Data {
    let answer: (Data, URLResponse)
    do {
      answer = try await session.data(from: url)
    } catch let error as URLError {
      throw ScenarioFailure("GET \(url.path) failed: URLError \(error.code.rawValue)")
    }
    guard (answer.1 as? HTTPURLResponse)?.statusCode == 200 else {
      throw ScenarioFailure("GET \(url.path) was not answered 200")
    }
    return answer.0
  }
}

/// A scenario step that could not run (the simulated server is unreachable, say).
struct ScenarioFailure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
