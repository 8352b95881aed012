import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Why the token server could not be started.
public struct TokenServerError: Error, Sendable, CustomStringConvertible {
  public var description: String
}

/// SIMULATED INTEGRATOR SERVER = REAL HTTP ON LOOPBACK.
///
/// The tests' fake token server, `Tests/ExchangerTests/Resources/token_server.py`, run by
/// python3 on 127.0.0.1, shared by `ExchangerTests` and `EndToEndTests` (this small support
/// target is how test targets share it). It stands in for the integrator's endpoint that calls
/// `alipay.system.oauth.token`; it talks to no real Alipay.
///
/// The server prints its port, then lives until its stdin closes (when this test process exits
/// the kernel closes the pipe) or until its own hard timeout, so it never outlives the tests.
public final class TokenServer: @unchecked Sendable {
  /// The access token every successful route answers with (a fixture, never printed).
  public static let token = "SERVER-ACCESS-TOKEN-5f3c9a1e"
  /// The Alipay user id every successful route answers with.
  public static let userID = "2088000000000001"
  /// `expires_in` of every successful route, in seconds (15 days).
  public static let expiresIn: TimeInterval = 1_296_000

  /// The script, relative to this file.
  public static let script = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()  // LoopbackTokenServer
    .deletingLastPathComponent()  // Support
    .deletingLastPathComponent()  // Tests
    .appendingPathComponent("ExchangerTests/Resources/token_server.py")

  /// Started once, on first use.
  public static let shared: Result<TokenServer, TokenServerError> = start()

  /// A second, independent instance on another port, started once on first use: the "other
  /// host" a redirect points at. Its `/log` shows every request it ever received.
  public static let secondary: Result<TokenServer, TokenServerError> = start()

  private static func start() -> Result<TokenServer, TokenServerError> {
    do {
      return .success(try TokenServer())
    } catch let error as TokenServerError {
      return .failure(error)
    } catch {
      return .failure(TokenServerError(description: "token server: \(error)"))
    }
  }

  /// The running server, or a test failure explaining why there is none.
  public static func running() throws -> TokenServer {
    try unwrap(shared)
  }

  /// The running second server, or a test failure explaining why there is none.
  public static func runningSecondary() throws -> TokenServer {
    try unwrap(secondary)
  }

  private static func unwrap(_ result: Result<TokenServer, TokenServerError>) throws
    -> TokenServer
  {
    switch result {
    case .success(let server): return server
    case .failure(let error):
      Issue.record("\(error)")
      throw error
    }
  }

  /// Every request the server received so far (except `/log` reads), oldest first: each with
  /// `method`, `path`, `query`, `body` and `headers` (names lowercased).
  public func receivedRequests() async throws -> [[String: Any]] {
    let (_, object) = try await get("/log")
    return object["requests"] as? [[String: Any]] ?? []
  }

  public let port: Int
  private let process: Process
  private let input: Pipe

  private init() throws {
    do {
      let server = try PythonServerProcess(
        script: Self.script, environment: ["TOKEN_SERVER_TIMEOUT": "600"])
      port = server.port
      process = server.process
      input = server.input
    } catch {
      throw TokenServerError(description: "\(error)")
    }
  }

  /// `http://127.0.0.1:<port><path>`.
  public func url(_ path: String) -> URL {
    URL(string: "http://127.0.0.1:\(port)\(path)")!
  }

  /// A plain GET to the server (to read what it recorded, or to wait until it holds a request).
  public func get(_ path: String) async throws -> (Int, [String: Any]) {
    let (data, response) = try await URLSession.shared.data(from: url(path))
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    return (status, object)
  }
}
