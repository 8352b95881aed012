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
/// `rotating_token_server.py` (next to this file), run by python3 on 127.0.0.1: an OAuth 2 token
/// endpoint that rotates refresh tokens and revokes a token family when a spent refresh token
/// comes back, as real servers do. Each instance is its own server on its own port, with its own
/// state, so its counts are the test's own.
///
/// Instances are forks of one python process (the script's `--zygote` mode), started once per
/// test process: starting python and importing `http.server` costs about a quarter of a CPU
/// second, and with a fresh python per instance a test run spent most of its first 15 seconds on
/// it, both threads of the cooperative pool blocked waiting for ports (three store loads then
/// missed their 10 s deadline in CI). A fork costs about a millisecond.
///
/// A server lives until ``stop()`` (or this object's deinit), until this process exits (the
/// zygote's stdin closes, and its servers follow it), or until its own hard timeout, so it never
/// outlives the tests.
public final class RotatingTokenServer: @unchecked Sendable {
  /// The script, relative to this file.
  public static let script = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()
    .appendingPathComponent("rotating_token_server.py")

  /// The server's port on 127.0.0.1.
  public let port: Int
  /// The server's process id (a child of the zygote).
  private let pid: Int32
  private let zygote: Zygote

  /// Starts a server and waits until it is listening.
  ///
  /// - Parameter hardTimeout: The server exits by itself after this many seconds.
  /// - Throws: ``RotatingTokenServerError`` when python3 or the script is missing, or the
  ///   server did not start.
  public init(hardTimeout: Int = 300) throws {
    zygote = try Zygote.shared.get()
    (port, pid) = try zygote.spawn(hardTimeout: hardTimeout)
  }

  deinit { stop() }

  /// Stops the server (it exits; its port refuses connections). Stopping twice is harmless.
  public func stop() {
    zygote.send("stop \(pid)")
  }

  /// The one python process that forks every server of this test process.
  private final class Zygote: @unchecked Sendable {
    static let shared: Result<Zygote, RotatingTokenServerError> = Result { try Zygote() }
      .mapError { RotatingTokenServerError(description: "\($0)") }

    private let launched: PythonServerProcess.Launched
    /// Serialises a command and its answer line.
    private let lock = NSLock()

    private init() throws {
      // The zygote's own hard timeout: longer than any test run; its stdin closing ends it
      // first when this process exits.
      launched = try PythonServerProcess.Launched(
        script: RotatingTokenServer.script, arguments: ["--zygote"],
        environment: ["ROTATING_TOKEN_SERVER_TIMEOUT": "5400"])
      guard launched.firstLine == "ready" else {
        launched.process.terminate()
        throw RotatingTokenServerError(
          description: "the rotating token server did not start (output: \(launched.firstLine))")
      }
    }

    func spawn(hardTimeout: Int) throws -> (port: Int, pid: Int32) {
      lock.lock()
      defer { lock.unlock() }
      try write("spawn \(max(1, hardTimeout))")
      let answer = PythonServerProcess.Launched.readLine(
        from: launched.output.fileHandleForReading)
      let words = (answer ?? "").split(separator: " ")
      guard words.count == 2, let port = Int(words[0]), port > 0, let pid = Int32(words[1])
      else {
        throw RotatingTokenServerError(
          description: "the rotating token server did not start a server (answer: "
            + "\(answer ?? "end of file"))")
      }
      return (port, pid)
    }

    func send(_ command: String) {
      lock.lock()
      defer { lock.unlock() }
      try? write(command)
    }

    private func write(_ command: String) throws {
      // A write to a pipe nobody reads would kill this process (SIGPIPE): the zygote only ends
      // at its hard timeout, long after any run, but a test must not die of it.
      guard launched.process.isRunning else {
        throw RotatingTokenServerError(description: "the rotating token server has exited")
      }
      do {
        try launched.input.fileHandleForWriting.write(contentsOf: Data((command + "\n").utf8))
      } catch {
        throw RotatingTokenServerError(
          description: "the rotating token server is gone (\(command)): \(error)")
      }
    }
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

  /// Waits until the server's counts satisfy `condition`, at most `timeout`, without polling:
  /// each request is a long poll that the server answers at its next change of state (a
  /// request arriving, answered or given up), and `condition` is asked again on each.
  ///
  /// - Returns: The first counts that satisfied `condition`, or `nil` when `timeout` passed
  ///   first.
  public func stats(
    within timeout: Duration, until condition: (Stats) async throws -> Bool
  ) async throws -> Stats? {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    var stats = try await self.stats()
    while true {
      if try await condition(stats) { return stats }
      let left = deadline - clock.now
      if left <= .zero { return nil }
      let milliseconds = max(1, Int((left / .milliseconds(1)).rounded(.up)))
      stats = Stats(try await get("/stats?after=\(stats.version)&wait_ms=\(milliseconds)"))
    }
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
  /// `fail_body`, `redirect_to`, `huge_reply`, `token_challenge`, `resource_challenge`,
  /// `revoke_access_after`, `reset_reused`, `client_assertion`,
  /// `revoke_status`, `revoke_delay`.
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
    /// Every `POST /token` that arrived (answered or not).
    public var tokenPosts: Int
    /// Token requests that arrived on a connection that had carried a request before (a reused
    /// keep-alive connection).
    public var reusedTokenPosts: Int
    /// Token requests on a reused connection that the server reset unanswered (`reset_reused`).
    public var reusedResets: Int
    /// Token requests whose body did not arrive in full (a POST replayed without its body).
    public var incompleteBodies: Int
    /// Refreshes refused with `invalid_scope`: they asked for a scope beyond the family's grant
    /// (`grantable_scope` narrows grants).
    public var invalidScopes: Int
    /// Refresh requests by the `scope` they carried (`(omitted)` when none).
    public var refreshScopes: [String: Int]
    /// Every `client_assertion` received (token and revocation requests), in order.
    public var assertions: [String]
    /// Every `POST /revoke`, in order.
    public var revocations: [Revocation]
    /// The path of every metadata request (`GET .../.well-known/...`), in order.
    public var metadataRequests: [String]
    /// The form of every `POST /token`, in order.
    public var tokenForms: [TokenForm]
    /// Token requests answered (a grant or a refusal), by their `X-Worker-Pid` (0 without one).
    public var answeredByPid: [Int32: Int]
    /// A count of the server's changes of state: a long poll waits for it to pass a value.
    public var version: Int

    /// Token requests answered to processes other than `pid` (a grant or a refusal).
    public func answered(excluding pid: Int32) -> Int {
      answeredByPid.filter { $0.key != pid }.values.reduce(0, +)
    }

    /// What one token request asked for.
    public struct TokenForm: Sendable, Equatable {
      /// Its `grant_type`.
      public var grantType: String
      /// Its `scope`, or `nil` when it had none.
      public var scope: String?
      /// Its `audience`, or `nil` when it had none.
      public var audience: String?
      /// Every `resource` it carried, in order.
      public var resources: [String]

      /// A form as the server records it.
      public init(
        grantType: String, scope: String? = nil, audience: String? = nil, resources: [String] = []
      ) {
        self.grantType = grantType
        self.scope = scope
        self.audience = audience
        self.resources = resources
      }
    }

    /// One revocation request (RFC 7009).
    public struct Revocation: Sendable, Equatable {
      /// The `token` it carried.
      public var token: String
      /// Its `token_type_hint` (empty when none).
      public var hint: String
      /// Its client authentication method (`basic`, `post`, `none`, `assertion`).
      public var authentication: String
      /// The status answered: 0 while in flight (or when the client hung up first), 401 for a
      /// refused client.
      public var status: Int

      /// A revocation request as the server records it.
      public init(token: String, hint: String, authentication: String, status: Int) {
        self.token = token
        self.hint = hint
        self.authentication = authentication
        self.status = status
      }
    }

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
      answeredByPid = Dictionary(
        table("answered_by_pid").map { (Int32($0.key) ?? 0, $0.value) }, uniquingKeysWith: +)
      version = (object["version"] as? NSNumber)?.intValue ?? 0
      clientAuthentication = table("client_auth")
      invalidClients = int("invalid_clients")
      scriptedFailures = int("scripted_failures")
      resourceOK = int("resource_ok")
      resourceUnauthorized = int("resource_unauthorized")
      accessRevocations = int("access_revocations")
      resourceNoToken = int("resource_no_token")
      redirects = int("redirects")
      tokenPosts = int("token_posts")
      reusedTokenPosts = int("reused_token_posts")
      reusedResets = int("reused_resets")
      incompleteBodies = int("incomplete_bodies")
      invalidScopes = int("invalid_scopes")
      refreshScopes = table("refresh_scopes")
      assertions = object["assertions"] as? [String] ?? []
      metadataRequests = object["metadata_requests"] as? [String] ?? []
      tokenForms = (object["token_forms"] as? [[String: Any]] ?? []).map {
        TokenForm(
          grantType: $0["grant_type"] as? String ?? "", scope: $0["scope"] as? String,
          audience: $0["audience"] as? String, resources: $0["resource"] as? [String] ?? [])
      }
      revocations = (object["revocations"] as? [[String: Any]] ?? []).map {
        Revocation(
          token: $0["token"] as? String ?? "", hint: $0["hint"] as? String ?? "",
          authentication: $0["auth"] as? String ?? "",
          status: ($0["status"] as? NSNumber)?.intValue ?? -1)
      }
    }

    public var description: String {
      "grants \(grants), requests \(requests), refreshes \(refreshes), issued \(issued), "
        + "reuses \(reuses), revoked families \(revokedFamilies), invalid grants "
        + "\(invalidGrants), aborted \(aborted), in flight \(inFlight), "
        + "families \(families), resource ok \(resourceOK), resource unauthorized "
        + "\(resourceUnauthorized), invalid clients \(invalidClients), scripted failures "
        + "\(scriptedFailures), token posts \(tokenPosts), reused token posts "
        + "\(reusedTokenPosts), reused resets \(reusedResets), incomplete bodies "
        + "\(incompleteBodies), invalid scopes \(invalidScopes)"
    }
  }
}
