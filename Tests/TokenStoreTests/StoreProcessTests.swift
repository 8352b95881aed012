import Foundation
import Testing

@testable import TokenStore

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// These tests run the `store-crasher` executable of this package (Sources/store-crasher) as child
// processes. `swift build --build-tests` and `swift test` build every target of the package, so
// the helper sits next to the test runner: the tests look for it in
//   1. $STORE_CRASHER (an explicit path, for unusual layouts),
//   2. the directory of CommandLine.arguments[0] (Linux: `.build/<config>/` holds both the
//      `AuthCoordinatorPackageTests.xctest` runner and `store-crasher`),
//   3. the directory of Bundle.main's executable, and the parent directory of any loaded
//      `.xctest` bundle (macOS, where the runner is Xcode's `xctest` tool).
// When it is not found the tests fail with a message; they never pass silently.

@Suite(.serialized, .timeLimit(.minutes(5))) struct StoreProcessTests {
  /// SIGKILLs a writer at random moments, over and over, and checks after every kill that the
  /// file decodes and holds the last model the writer reported as saved, or the one after it
  /// (saved, killed before it could report). Half the kills come from this process after a
  /// random number of reported saves (zero included: a kill during start-up); half come from
  /// the writer itself, from a second thread after a random number of microseconds, so they
  /// land anywhere inside a save: writing the temporary file, fsync, rename, directory fsync.
  @Test func sigkillAtRandomMomentsNeverLeavesATornFile() async throws {
    let crasher = try requireCrasher()
    var generator = SeededGenerator(seed: testSeed("sigkillAtRandomMomentsNeverLeavesATornFile"))
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let key = AccountKey(account: "crash")
    let path = dir.file().path(percentEncoded: false)
    let clock = ContinuousClock()
    let began = clock.now
    var inFile: Int?  // the index of the model in the file before the run
    var start = 0
    var kills = 0
    var sawEveryCase = (none: false, first: false, later: false)
    for iteration in 0..<120 {
      var arguments = ["write", path, "--key", key.account, "--start", String(start)]
      let selfKill = iteration.isMultiple(of: 2)
      let reportsBeforeKill = Int.random(in: 0...5, using: &generator)
      if selfKill {
        arguments += [
          "--self-kill-after-us", String(UInt32.random(in: 0..<30_000, using: &generator)),
        ]
      }
      let run = try CrasherRun(crasher, arguments)
      var saved: [Int] = []
      if !selfKill {
        while saved.count < reportsBeforeKill, let line = await run.nextLine() {
          saved.append(try #require(Int(line), "unexpected output \(line)"))
        }
        run.kill()
      }
      for line in await run.remainingLines() {
        saved.append(try #require(Int(line), "unexpected output \(line)"))
      }
      let (reason, status) = await run.wait()
      #expect(reason == .uncaughtSignal && status == SIGKILL, "iteration \(iteration)")
      kills += 1

      // The file is whole, never garbage: it decodes, or it does not exist yet.
      var models: [AccountKey: AuthModel] = [:]
      if let data = FileManager.default.contents(atPath: path) {
        models = try StoreFileFormat.decode(data)
      }
      let found = crasherIndex(models[key])
      let allowed: Set<Int?> = saved.last.map { [$0, $0 + 1] } ?? [inFile, start]
      #expect(
        allowed.contains(found),
        "iteration \(iteration): file holds \(String(describing: found)), reported \(saved)")
      if let found { #expect(models[key] == crasherModel(found, mcUid: key.account)) }
      #expect(try !dir.contents().contains { $0.contains(".corrupt-") })
      if saved.isEmpty && found == inFile { sawEveryCase.none = true }
      if let last = saved.last, found == last { sawEveryCase.first = true }
      if let last = saved.last, found == last + 1 { sawEveryCase.later = true }
      inFile = found
      start = max(saved.last ?? start, found ?? start) + 2
    }
    // A clean run removes the temporary files the killed writers left behind.
    let clean = try CrasherRun(crasher, ["write", path, "--key", key.account, "--count", "1"])
    #expect(await clean.remainingLines().last == "done")
    #expect(await clean.wait().status == 0)
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
    let elapsed = clock.now - began
    print(
      "sigkill test: \(kills) kills in \(elapsed); killed before any save: \(sawEveryCase.none), "
        + "file = last reported: \(sawEveryCase.first), file = one past: \(sawEveryCase.later)")
    #expect(kills >= 100)
  }

  /// Two processes write different keys of one store at the same time: while they run, every
  /// read of the file decodes (no torn file), and at the end both keys hold their last model
  /// (the `flock` around read-modify-write loses no update).
  @Test func twoProcessesWritingDifferentKeysLoseNoUpdate() async throws {
    let crasher = try requireCrasher()
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let path = dir.file().path(percentEncoded: false)
    let count = 150
    let writers = try ["a", "b"].map { name in
      try CrasherRun(crasher, ["write", path, "--key", name, "--count", String(count)])
    }
    let reads = try readWhileRunning(path, writers)
    for writer in writers {
      let lines = await writer.remainingLines()
      #expect(lines.last == "done")
      #expect(lines.dropLast() == (0..<count).map(String.init)[...])
      #expect(await writer.wait().status == 0)
    }
    let models = try StoreFileFormat.decode(
      try #require(FileManager.default.contents(atPath: path)))
    #expect(models.count == 2)
    #expect(models[AccountKey(account: "a")] == crasherModel(count - 1, mcUid: "a"))
    #expect(models[AccountKey(account: "b")] == crasherModel(count - 1, mcUid: "b"))
    print("two writers, different keys: \(reads) concurrent reads, all whole")
  }

  /// Two processes write the same key at the same time: never a torn file, and the final model
  /// is the last one of one of the writers.
  @Test func twoProcessesWritingTheSameKeyNeverTearTheFile() async throws {
    let crasher = try requireCrasher()
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let path = dir.file().path(percentEncoded: false)
    let count = 150
    let writers = try [0, 100_000].map { start in
      try CrasherRun(
        crasher,
        ["write", path, "--key", "same", "--start", String(start), "--count", String(count)])
    }
    let reads = try readWhileRunning(path, writers)
    for writer in writers {
      #expect(await writer.remainingLines().last == "done")
      #expect(await writer.wait().status == 0)
    }
    let models = try StoreFileFormat.decode(
      try #require(FileManager.default.contents(atPath: path)))
    let last = crasherIndex(models[AccountKey(account: "same")])
    #expect(last == count - 1 || last == 100_000 + count - 1)
    #expect(models.count == 1)
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
    print("two writers, same key: \(reads) concurrent reads, all whole")
  }

  /// As root, `chmod 000` would not stop the store from reading; a child process that drops to
  /// the `nobody` user id (65534) before opening the store is refused like any other user:
  /// before it even tries to open the 0600 file, since the directory is not its own
  /// (`insecure_permissions`, the ownership check).
  @Test(.enabled(if: getuid() == 0, "needs root to switch to another user id"))
  func unreadableFileIsPermissionDeniedForAnotherUser() async throws {
    let crasher = try requireCrasher()
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    chmod(dir.url.path(percentEncoded: false), 0o755)  // others may look up names, not read
    try await FileTokenStore(url: dir.file()).save(sampleModel(1), for: key(1))
    let before = try Data(contentsOf: dir.file())
    let path = dir.file().path(percentEncoded: false)
    let asNobody = try CrasherRun(crasher, ["read", path, "--as-uid", "65534"])
    #expect(await asNobody.remainingLines() == ["error insecure_permissions"])
    #expect(await asNobody.wait().status == 0)
    let asRoot = try CrasherRun(crasher, ["read", path])
    #expect(await asRoot.remainingLines() == ["ok 1"])
    #expect(await asRoot.wait().status == 0)
    #expect(try Data(contentsOf: dir.file()) == before)
  }

  // MARK: - Helpers

  /// Reads and decodes the file in a loop until every writer has exited.
  ///
  /// - Returns: How many reads found a file.
  private func readWhileRunning(_ path: String, _ writers: [CrasherRun]) throws -> Int {
    var reads = 0
    while writers.contains(where: { $0.process.isRunning }) {
      guard let data = FileManager.default.contents(atPath: path) else { continue }
      _ = try StoreFileFormat.decode(data)
      reads += 1
    }
    return reads
  }

  private func requireCrasher() throws -> URL {
    try #require(
      locateCrasher(),
      """
      store-crasher not found next to the test runner (\(CommandLine.arguments[0])). Build the \
      whole package (`swift build --build-tests`) or set STORE_CRASHER to its path.
      """)
  }

  private func locateCrasher() -> URL? {
    var candidates: [URL] = []
    if let explicit = ProcessInfo.processInfo.environment["STORE_CRASHER"] {
      candidates.append(URL(fileURLWithPath: explicit))
    }
    let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(runner.deletingLastPathComponent().appending(path: "store-crasher"))
    if let executable = Bundle.main.executableURL {
      candidates.append(executable.deletingLastPathComponent().appending(path: "store-crasher"))
    }
    for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
      candidates.append(
        bundle.bundleURL.deletingLastPathComponent().appending(path: "store-crasher"))
    }
    return candidates.first {
      FileManager.default.isExecutableFile(atPath: $0.path(percentEncoded: false))
    }
  }
}

/// A running `store-crasher`, its stdout read line by line (blocking reads, no sleeping).
///
/// Every blocking read and wait runs on a thread of its own, never on the cooperative pool: the
/// pool has one thread per core, and a test blocked on a child for seconds on one of them left
/// every other test of the run one thread (on CI, with the stress suites beside it, file store
/// loads of three tests then missed their 10 s deadline).
final class CrasherRun: @unchecked Sendable {
  let process = Process()
  private let output: FileHandle
  private var buffer = Data()

  init(_ executable: URL, _ arguments: [String]) throws {
    process.executableURL = executable
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    output = pipe.fileHandleForReading
  }

  /// The next complete line, or `nil` once the process has closed its output.
  func nextLine() async -> String? { await Self.offThePool { self.blockingNextLine() } }

  /// Every line until the end of the output.
  func remainingLines() async -> [String] {
    await Self.offThePool {
      var lines: [String] = []
      while let line = self.blockingNextLine() { lines.append(line) }
      return lines
    }
  }

  /// Waits for the process to end.
  ///
  /// - Returns: How it ended and its exit status or signal.
  @discardableResult
  func wait() async -> (reason: Process.TerminationReason, status: Int32) {
    await Self.offThePool {
      self.process.waitUntilExit()
      return (self.process.terminationReason, self.process.terminationStatus)
    }
  }

  private static func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: body()) }
    }
  }

  private func blockingNextLine() -> String? {
    while true {
      if let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
        let line = String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self)
        buffer.removeSubrange(buffer.startIndex...newline)
        return line
      }
      let chunk = output.availableData  // blocks until data or end of file
      if chunk.isEmpty { return nil }
      buffer.append(chunk)
    }
  }

  func kill() {
    sendSIGKILL(to: process.processIdentifier)
  }

}

/// `kill(pid, SIGKILL)`, outside the class whose `kill()` method would shadow it.
private func sendSIGKILL(to pid: pid_t) {
  _ = kill(pid, SIGKILL)
}
