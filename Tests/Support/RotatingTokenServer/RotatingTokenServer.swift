import Foundation
import LoopbackTokenServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Why the rotating token server could not be started or asked.
public struct RotatingTokenServerError: Error, Sendable, CustomStringConvertible {
  public var description: String
}

/// SIMULATED INTEGRATOR SERVER = REAL HTTP ON LOOPBACK.
///
/// Launches `rotating_token_server.py` (next to this file) with python3 on 127.0.0.1: an OAuth 2
/// token endpoint that rotates refresh tokens and revokes a token family when a spent refresh
/// token comes back, as real servers do. Each test starts its own instance, so its counts are the
/// test's own. The server lives until ``stop()``, until this process exits (its stdin closes), or
/// until its own hard timeout, so it never outlives the tests.
public final class RotatingTokenServer: @unchecked Sendable {
  /// The script, relative to this file.
  public static let script = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .appendingPathComponent("rotating_token_server.py")

  /// The server's port on 127.0.0.1.
  public let port: Int
  private let process: Process
  private let input: Pipe

  /// Starts a server and waits until it printed its port.
  ///
  /// - Parameter hardTimeout: The server exits by itself after this many seconds.
  /// - Throws: ``RotatingTokenServerError`` when python3 or the script is missing, or the
  ///   server did not start.
  public init(hardTimeout: Int = 300) throws {
    do {
      let server = try PythonServerProcess(
        script: Self.script, environment: ["ROTATING_TOKEN_SERVER_TIMEOUT": String(hardTimeout)])
      port = server.port
      process = server.process
      input = server.input
    } catch {
      throw RotatingTokenServerError(description: "\(error)")
    }
  }

  deinit { stop() }

  /// Closes the server's stdin, which makes it exit.
  public func stop() {
    try? input.fileHandleForWriting.close()
  }

  /// `http://127.0.0.1:<port>`.
  public var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }

  /// `http://127.0.0.1:<port><path>`.
  public func url(_ path: String) -> URL {
    URL(string: "http://127.0.0.1:\(port)\(path)")!
  }

  /// The server's counts (`GET /stats`).
  public func stats() async throws -> Stats {
    Stats(try await get("/stats"))
  }

  /// Sets the delay before token answers and the `expires_in` of new tokens (`GET /config`).
  ///
  /// - Parameters:
  ///   - delay: Seconds the server waits before it answers a token request.
  ///   - expiresIn: The `expires_in` of new tokens, in seconds.
  public func configure(delay: Double? = nil, expiresIn: Int? = nil) async throws {
    var settings: [String: String] = [:]
    if let delay { settings["delay"] = "\(delay)" }
    if let expiresIn { settings["expires_in"] = "\(expiresIn)" }
    try await configure(settings)
  }

  /// Sets any of the server's `/config` values by name (see the script's header): `delay`,
  /// `reply_delay`, `expires_in`, `resource_delay`, `client_id`, `client_secret`, `fail_count`, `fail_status`,
  /// `fail_body`, `redirect_to`, `huge_reply`, `token_challenge`, `resource_challenge`.
  ///
  /// - Parameter settings: The values, by name.
  public func configure(_ settings: [String: String]) async throws {
    let query = settings.map { name, value in
      "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
    }
    _ = try await get("/config?" + query.joined(separator: "&"))
  }

  /// Revokes every access token issued so far (`GET /revoke-access`); their refresh tokens stay
  /// valid. `/resource` answers 401 to them from now on.
  ///
  /// - Returns: How many tokens were revoked.
  @discardableResult
  public func revokeAccessTokens() async throws -> Int {
    (try await get("/revoke-access")["revoked"] as? NSNumber)?.intValue ?? 0
  }

  /// Whether the server still accepts `accessToken` (issued, family not revoked).
  public func isActive(_ accessToken: String) async throws -> Bool {
    let escaped =
      accessToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? accessToken
    return try await get("/introspect?token=\(escaped)")["active"] as? Bool ?? false
  }

  /// A token grant (`POST /token`), as a test would seed a store: the reply's fields.
  ///
  /// - Parameter form: The form fields, for example `["grant_type": "client_credentials"]`.
  /// - Returns: The HTTP status and the JSON reply.
  public func token(_ form: [String: String]) async throws -> (Int, [String: Any]) {
    var request = URLRequest(url: url("/token"))
    request.httpMethod = "POST"
    request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
    request.httpBody = Data(
      form.map { name, value in
        "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
      }.joined(separator: "&").utf8)
    let (data, response) = try await URLSession.shared.data(for: request)
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    return (status, object)
  }

  private func get(_ path: String) async throws -> [String: Any] {
    let (data, _) = try await URLSession.shared.data(from: url(path))
    guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
      throw RotatingTokenServerError(description: "\(path) did not answer a JSON object")
    }
    return object
  }

  /// The server's counts.
  public struct Stats: Sendable, CustomStringConvertible {
    /// Successful grants by grant type.
    public var grants: [String: Int]
    /// Token requests by grant type (answered, successful or not; aborted ones not).
    public var requests: [String: Int]
    /// Successful refresh-token grants.
    public var refreshes: Int
    /// Every successful grant.
    public var issued: Int
    /// Spent refresh tokens that came back.
    public var reuses: Int
    /// Families revoked after a reuse.
    public var revokedFamilies: Int
    /// `invalid_grant` answers (reuses included).
    public var invalidGrants: Int
    /// Requests whose client hung up during the delay (nothing rotated).
    public var aborted: Int
    /// Token requests the server holds now.
    public var inFlight: Int
    /// Each request the server holds: its `X-Worker-Pid` (0 without one) and how long it has
    /// been held, in milliseconds.
    public var inFlightRequests: [(pid: Int32, ageMilliseconds: Double)]
    /// Token families started.
    public var families: Int
    /// Token requests by client authentication method: `basic`, `post` or `none`.
    public var clientAuthentication: [String: Int]
    /// Token requests refused with `invalid_client`.
    public var invalidClients: Int
    /// Token requests answered as `/config` scripted (a failure, a redirect, a huge body).
    public var scriptedFailures: Int
    /// `/resource` requests answered 200.
    public var resourceOK: Int
    /// `/resource` requests answered 401.
    public var resourceUnauthorized: Int
    /// `/revoke-access` calls.
    public var accessRevocations: Int
    /// `/resource` requests that carried no `Authorization` header.
    public var resourceNoToken: Int
    /// `/redirect` requests answered.
    public var redirects: Int

    init(_ object: [String: Any]) {
      func int(_ name: String) -> Int { (object[name] as? NSNumber)?.intValue ?? 0 }
      func table(_ name: String) -> [String: Int] {
        (object[name] as? [String: Any] ?? [:]).compactMapValues { ($0 as? NSNumber)?.intValue }
      }
      grants = table("grants")
      requests = table("requests")
      refreshes = int("refreshes")
      issued = int("issued")
      reuses = int("reuses")
      revokedFamilies = int("revoked_families")
      invalidGrants = int("invalid_grants")
      aborted = int("aborted")
      inFlight = int("in_flight")
      inFlightRequests = (object["in_flight_requests"] as? [[String: Any]] ?? []).map {
        (
          ($0["pid"] as? NSNumber)?.int32Value ?? 0,
          ($0["age_ms"] as? NSNumber)?.doubleValue ?? 0
        )
      }
      families = int("families")
      clientAuthentication = table("client_auth")
      invalidClients = int("invalid_clients")
      scriptedFailures = int("scripted_failures")
      resourceOK = int("resource_ok")
      resourceUnauthorized = int("resource_unauthorized")
      accessRevocations = int("access_revocations")
      resourceNoToken = int("resource_no_token")
      redirects = int("redirects")
    }

    public var description: String {
      "grants \(grants), requests \(requests), refreshes \(refreshes), issued \(issued), "
        + "reuses \(reuses), revoked families \(revokedFamilies), invalid grants "
        + "\(invalidGrants), aborted \(aborted), in flight \(inFlight), "
        + "families \(families), resource ok \(resourceOK), resource unauthorized "
        + "\(resourceUnauthorized), invalid clients \(invalidClients), scripted failures "
        + "\(scriptedFailures)"
    }
  }
}
