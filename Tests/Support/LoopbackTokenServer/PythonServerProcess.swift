import Foundation

/// A python3 HTTP server started for the tests: it binds 127.0.0.1 on a free port, prints the
/// port on stdout, and lives until its stdin closes (this test process exited: the kernel closes
/// the pipe) or its own hard timeout passes, so it never outlives the tests. Shared by the
/// loopback token server and the rotating token server.
public struct PythonServerProcess: Sendable {
  /// Why a server could not be started.
  public struct LaunchError: Error, Sendable, CustomStringConvertible {
    public var description: String
  }

  /// The port it printed.
  public let port: Int
  /// The python process.
  public let process: Process
  /// Its stdin: closing it stops the server.
  public let input: Pipe

  /// Starts `script` with python3 and waits for the port it prints.
  ///
  /// - Parameters:
  ///   - script: The server script.
  ///   - environment: Added to this process's environment (the server's hard timeout, say).
  /// - Throws: ``LaunchError`` when python3 or the script is missing, or no port was printed.
  public init(script: URL, environment extra: [String: String]) throws {
    let launched = try Launched(script: script, arguments: [], environment: extra)
    let text = launched.firstLine
    guard let port = Int(text), port > 0 else {
      launched.process.terminate()
      throw LaunchError(
        description: "the server exited without printing its port (output: \(text))")
    }
    self.port = port
    self.process = launched.process
    self.input = launched.input
  }

  /// A python3 process started with pipes for its stdin and stdout, and the first line it
  /// printed (read on the calling thread: call it where blocking briefly is fine).
  public struct Launched: Sendable {
    /// The python process.
    public let process: Process
    /// Its stdin.
    public let input: Pipe
    /// Its stdout.
    public let output: Pipe
    /// The first line it printed, trimmed; empty when it exited first.
    public let firstLine: String

    /// Starts `script` with python3 and `arguments`, and reads its first line.
    ///
    /// - Throws: ``LaunchError`` when python3 or the script is missing, or it does not start.
    public init(script: URL, arguments: [String], environment extra: [String: String]) throws {
      guard FileManager.default.fileExists(atPath: script.path) else {
        throw LaunchError(description: "the server script is missing: \(script.path)")
      }
      guard let python = PythonServerProcess.executable(named: "python3") else {
        throw LaunchError(
          description: "python3 was not found on PATH: the tests run a real HTTP server "
            + "(\(script.lastPathComponent)) with it. Install python3 (CI does).")
      }
      let process = Process()
      process.executableURL = python
      process.arguments = [script.path] + arguments
      var environment = ProcessInfo.processInfo.environment
      environment["PYTHONUNBUFFERED"] = "1"
      environment.merge(extra) { _, new in new }
      process.environment = environment
      let input = Pipe()
      let output = Pipe()
      process.standardInput = input
      process.standardOutput = output
      do {
        try process.run()
      } catch {
        throw LaunchError(description: "could not launch \(python.path): \(error)")
      }
      self.process = process
      self.input = input
      self.output = output
      self.firstLine = Self.readLine(from: output.fileHandleForReading) ?? ""
    }

    /// Reads up to the next newline, a byte at a time (so nothing after it is consumed);
    /// nil at end of file.
    public static func readLine(from handle: FileHandle) -> String? {
      var line = Data()
      while true {
        guard let byte = try? handle.read(upToCount: 1), let first = byte.first else {
          return nil
        }
        if first == UInt8(ascii: "\n") { break }
        line.append(first)
      }
      return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespaces)
    }
  }

  static func executable(named name: String) -> URL? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    for directory in path.split(separator: ":") {
      let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(name)
      if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    }
    return nil
  }
}
