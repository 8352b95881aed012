import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Why the token server could not be started.
struct TokenServerError: Error, Sendable, CustomStringConvertible {
  var description: String
}

/// The suite's one fake token server: `Resources/token_server.py` run by python3 on 127.0.0.1.
///
/// The server prints its port, then lives until its stdin closes (when this test process exits,
/// the kernel closes the pipe's write end) or until its own hard timeout, so it never outlives
/// the tests.
final class TokenServer: @unchecked Sendable {
  /// The access token every successful route answers with.
  static let token = "SERVER-ACCESS-TOKEN-5f3c9a1e"
  /// The Alipay user id every successful route answers with.
  static let userID = "2088000000000001"

  /// Started once, on first use.
  static let shared: Result<TokenServer, TokenServerError> = {
    do {
      return .success(try TokenServer())
    } catch let error as TokenServerError {
      return .failure(error)
    } catch {
      return .failure(TokenServerError(description: "token server: \(error)"))
    }
  }()

  /// The running server, or a test failure explaining why there is none.
  static func running() throws -> TokenServer {
    switch shared {
    case .success(let server): return server
    case .failure(let error):
      Issue.record("\(error)")
      throw error
    }
  }

  let port: Int
  private let process: Process
  private let input: Pipe

  private init() throws {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("Resources/token_server.py")
    guard let python = Self.executable(named: "python3") else {
      throw TokenServerError(
        description: "python3 was not found on PATH: ExchangerTests run a real HTTP server "
          + "(\(script.lastPathComponent)) with it. Install python3 (CI does).")
    }
    let process = Process()
    process.executableURL = python
    process.arguments = [script.path]
    var environment = ProcessInfo.processInfo.environment
    environment["TOKEN_SERVER_TIMEOUT"] = "600"
    environment["PYTHONUNBUFFERED"] = "1"
    process.environment = environment
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    do {
      try process.run()
    } catch {
      throw TokenServerError(description: "could not launch \(python.path): \(error)")
    }
    var line = Data()
    let reader = output.fileHandleForReading
    while !line.contains(UInt8(ascii: "\n")) {
      let chunk = reader.availableData
      if chunk.isEmpty { break }
      line.append(chunk)
    }
    let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    guard let port = Int(text), port > 0 else {
      process.terminate()
      throw TokenServerError(
        description: "the token server exited without printing its port (output: \(text))")
    }
    self.port = port
    self.process = process
    self.input = input
  }

  /// `http://127.0.0.1:<port><path>`.
  func url(_ path: String) -> URL {
    URL(string: "http://127.0.0.1:\(port)\(path)")!
  }

  /// A plain GET to the server, for reading what it recorded.
  func get(_ path: String) async throws -> (Int, [String: Any]) {
    let (data, response) = try await URLSession.shared.data(from: url(path))
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    let object = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    return (status, object)
  }

  private static func executable(named name: String) -> URL? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") {
      let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
  }
}
