import AuthCoordinatorTestKit
import Foundation
import RotatingTokenServer
import SyncPrimitives
import Testing
import TokenStore

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// These tests run the `auth-worker` executable of this package (Sources/auth-worker) as child
// processes. `swift build --build-tests` and `swift test` build every target of the package, so
// the worker sits next to the test runner: the tests look for it in
//   1. $AUTH_WORKER (an explicit path, for unusual layouts),
//   2. the directory of CommandLine.arguments[0] (Linux: `.build/<config>/` holds both the
//      `AuthCoordinatorPackageTests.xctest` runner and `auth-worker`),
//   3. the directory of Bundle.main's executable, and the parent directory of any loaded
//      `.xctest` bundle (macOS, where the runner is Xcode's `xctest` tool).
// When it is not found the tests fail with a message; they never pass silently.
//
// Nothing here blocks a thread of the cooperative pool, and nothing polls: a wait suspends until
// the event it waits for (a worker's line, its exit, a change at the token server), bounded by a
// time limit that fails the test when the event never comes.

/// Whether the long variants run (`MULTIPROCESS_FULL=1`).
let fullRun = ProcessInfo.processInfo.environment["MULTIPROCESS_FULL"] == "1"

/// The key every test uses.
let testKey = AccountKey(account: "u1")

enum WorkerLocation {
  static let url: URL? = {
    // A worker that exits while the test writes to its stdin must not kill the test runner.
    signal(SIGPIPE, SIG_IGN)
    var candidates: [URL] = []
    if let explicit = ProcessInfo.processInfo.environment["AUTH_WORKER"] {
      candidates.append(URL(fileURLWithPath: explicit))
    }
    let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(runner.deletingLastPathComponent().appending(path: "auth-worker"))
    if let executable = Bundle.main.executableURL {
      candidates.append(executable.deletingLastPathComponent().appending(path: "auth-worker"))
    }
    for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
      candidates.append(bundle.bundleURL.deletingLastPathComponent().appending(path: "auth-worker"))
    }
    return candidates.first {
      FileManager.default.isExecutableFile(atPath: $0.path(percentEncoded: false))
    }
  }()

  static func require() throws -> URL {
    try #require(
      url,
      """
      auth-worker not found next to the test runner (\(CommandLine.arguments[0])). Build the \
      whole package (`swift build --build-tests`) or set AUTH_WORKER to its path.
      """)
  }
}

/// One running `auth-worker`: its stdout collected line by line by a reader thread, its stdin
/// open for commands.
final class WorkerProcess: @unchecked Sendable {
  let process = Process()
  let pid: Int32
  private let input: FileHandle
  private let lock = NSLock()
  private var collected: [String] = []
  private var partial = Data()
  private var closed = false
  /// Set when the process's termination is reported.
  private let exited = LockedState(false)
  /// Changed at each new line, at the end of the output and at the exit.
  private let signal = ChangeSignal()

  init(_ executable: URL, _ arguments: [String]) throws {
    process.executableURL = executable
    process.arguments = arguments
    let (signal, exited) = (signal, exited)
    process.terminationHandler = { _ in
      exited.withLock { $0 = true }
      signal.changed()
    }
    let output = Pipe()
    let input = Pipe()
    process.standardOutput = output
    process.standardInput = input
    try process.run()
    self.pid = process.processIdentifier
    self.input = input.fileHandleForWriting
    let reader = output.fileHandleForReading
    Thread.detachNewThread { [self] in
      while true {
        let chunk = reader.availableData  // blocks this (non-pool) thread
        if chunk.isEmpty { break }
        append(chunk)
        signal.changed()
      }
      lock.locked { closed = true }
      signal.changed()
    }
  }

  private func append(_ chunk: Data) {
    lock.locked {
      partial.append(chunk)
      while let newline = partial.firstIndex(of: UInt8(ascii: "\n")) {
        collected.append(
          String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
        partial.removeSubrange(partial.startIndex...newline)
      }
    }
  }

  /// Every complete line so far.
  var lines: [String] { lock.locked { collected } }

  /// Whether the worker closed its stdout (it exited).
  var outputClosed: Bool { lock.locked { closed } }

  /// Whether the process ended (its termination was reported).
  var hasExited: Bool { exited.withLock { $0 } }

  /// Writes `line` to the worker's stdin (ignored once the worker is gone).
  func send(_ line: String) {
    try? input.write(contentsOf: Data((line + "\n").utf8))
  }

  /// Closes the worker's stdin.
  func closeInput() {
    try? input.close()
  }

  /// The first line that satisfies `predicate`, waiting at most `timeout` for it (or for the
  /// end of the output).
  func line(
    within timeout: Duration, where predicate: @escaping @Sendable (String) -> Bool
  ) async -> String? {
    try? await signal.waitUntil(within: timeout) { [self] in
      lock.locked { closed || collected.contains(where: predicate) }
    }
    return lines.first(where: predicate)
  }

  /// Waits until the process ended, at most `timeout`.
  ///
  /// - Returns: Whether it ended.
  func exit(within timeout: Duration) async -> Bool {
    (try? await signal.waitUntil(within: timeout) { [exited] in exited.withLock { $0 } }) != nil
  }

  /// The worker's result line, decoded.
  func result(within timeout: Duration) async -> WorkerResult? {
    guard let line = await line(within: timeout, where: { $0.hasPrefix("{\"result\":") }),
      let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
      let result = object["result"] as? [String: Any]
    else { return nil }
    return WorkerResult(result)
  }

  /// Sends SIGKILL.
  func kill() {
    sendSignal(SIGKILL, to: pid)
  }

  /// Waits until the process ended, at most `timeout`; kills it past that.
  func reap(within timeout: Duration = .seconds(5)) async {
    if await !exit(within: timeout) {
      kill()
      _ = await exit(within: .seconds(5))
    }
  }
}

extension NSLock {
  /// Runs `body` holding the lock (`NSLocking.withLock` needs macOS 14).
  func locked<R>(_ body: () throws -> R) rethrows -> R {
    lock()
    defer { unlock() }
    return try body()
  }
}

/// `kill(2)`, outside the class whose `kill()` method would shadow it.
func sendSignal(_ signal: Int32, to pid: Int32) {
  _ = kill(pid, signal)
}

/// The JSON line a worker prints at the end of a run.
struct WorkerResult: CustomStringConvertible {
  let pid: Int
  let served: Int
  /// Access token served → how many calls got it.
  let tokens: [String: Int]
  /// Error code → how many calls threw it.
  let errors: [String: Int]
  let maxWaitMilliseconds: Double
  let elapsedMilliseconds: Double
  /// This process's authorizer calls: started, succeeded, failed, refresh_grants, new_families.
  let authorizations: [String: Int]

  init(_ object: [String: Any]) {
    func table(_ name: String) -> [String: Int] {
      (object[name] as? [String: Any] ?? [:]).compactMapValues { ($0 as? NSNumber)?.intValue }
    }
    pid = (object["pid"] as? NSNumber)?.intValue ?? 0
    served = (object["served"] as? NSNumber)?.intValue ?? 0
    tokens = table("tokens")
    errors = table("errors")
    maxWaitMilliseconds = (object["max_wait_ms"] as? NSNumber)?.doubleValue ?? 0
    elapsedMilliseconds = (object["elapsed_ms"] as? NSNumber)?.doubleValue ?? 0
    authorizations = table("authorizations")
  }

  var description: String {
    "pid \(pid): served \(served), \(tokens.count) distinct tokens, errors \(errors), "
      + "longest wait \(Int(maxWaitMilliseconds)) ms, run \(Int(elapsedMilliseconds)) ms, "
      + "authorizer \(authorizations)"
  }
}

/// A temporary directory with one store file, a rotating token server, and the workers started
/// on them. ``tearDown()`` kills what is left and removes everything.
final class Rig: @unchecked Sendable {
  let directory: URL
  let storeURL: URL
  /// The lease file `FileAuthorizationLease(nextTo:)` keeps next to the store.
  var leaseURL: URL { URL(fileURLWithPath: storeURL.path(percentEncoded: false) + ".lease") }
  let server: RotatingTokenServer
  let worker: URL
  private let lock = NSLock()
  private var started: [WorkerProcess] = []

  init() throws {
    worker = try WorkerLocation.require()
    var template = Array((NSTemporaryDirectory() + "/MultiProcessTests.XXXXXX").utf8CString)
    let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    directory = URL(fileURLWithPath: String(cString: try #require(created)), isDirectory: true)
    storeURL = directory.appending(path: "tokens.store")
    do {
      server = try RotatingTokenServer()
    } catch {
      Issue.record("\(error)")
      throw error
    }
  }

  /// Starts a token family at the server and stores its model for ``testKey``, expired or not.
  ///
  /// - Returns: The stored model.
  @discardableResult
  func seed(expired: Bool) async throws -> AuthModel {
    let (status, reply) = try await server.token(["grant_type": "client_credentials"])
    try #require(status == 200, "seeding grant: HTTP \(status) \(reply)")
    let model = AuthModel(
      uid: reply["user_id"] as? String ?? "2088000000000000",
      accessToken: try #require(reply["access_token"] as? String),
      mcUid: testKey.account,
      expiresAt: Date().addingTimeInterval(expired ? -3600 : 3600),
      refreshToken: try #require(reply["refresh_token"] as? String))
    try await FileTokenStore(url: storeURL).save(model, for: testKey)
    return model
  }

  /// The model the store file holds for ``testKey`` (read by a fresh store).
  func storedModel() async throws -> AuthModel? {
    try await FileTokenStore(url: storeURL).model(for: testKey)
  }

  /// Starts `count` workers running `scenario`, waits until each printed "ready", then sends
  /// each "go" (all at once).
  func start(
    _ count: Int, _ scenario: String, _ arguments: [String] = [], go: Bool = true
  ) async throws -> [WorkerProcess] {
    let common = [
      scenario, "--store", storeURL.path(percentEncoded: false), "--server",
      server.baseURL.absoluteString,
    ]
    var workers: [WorkerProcess] = []
    for _ in 0..<count {
      let process = try WorkerProcess(worker, common + arguments)
      lock.locked { started.append(process) }
      workers.append(process)
    }
    for process in workers {
      let ready = await process.line(within: .seconds(20)) { $0 == "ready" }
      try #require(ready != nil, "worker \(process.pid) did not start: \(process.lines)")
    }
    if go {
      for process in workers { process.send("go") }
    }
    return workers
  }

  /// The results of `workers`, which must all come within `timeout`; then tells each to quit.
  func results(_ workers: [WorkerProcess], within timeout: Duration) async throws
    -> [WorkerResult]
  {
    var results: [WorkerResult] = []
    for process in workers {
      let result = await process.result(within: timeout)
      try #require(result != nil, "worker \(process.pid) printed no result: \(process.lines)")
      results.append(result!)
    }
    for process in workers { process.send("quit") }
    return results
  }

  func tearDown() async {
    let workers = lock.locked { started }
    for process in workers where process.process.isRunning { process.kill() }
    for process in workers { await process.reap() }
    server.stop()
    try? FileManager.default.removeItem(at: directory)
  }
}

/// Prints a line to the test log.
func report(_ line: String) {
  print("[MultiProcessTests] \(line)")
}
