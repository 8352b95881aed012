import AuthCoordinator
import Dispatch
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// B8's two workloads: K processes share one `FileTokenStore`, with or without its
/// `FileAuthorizationLease`.
enum CrossProcessMode: String, CaseIterable, Sendable {
  case lease = "FileAuthorizationLease"
  case noLease = "no lease"

  var childArgument: String { self == .lease ? "lease" : "none" }
}

/// One repetition of B8, as the parent saw it.
struct CrossProcessRun: Sendable {
  var reports: [CrossProcessChild.Report]
  /// Wall clock (ns) when the parent wrote `go` to the first child.
  var goNanos: UInt64

  var authorizations: Int { reports.map(\.authorizationsStarted).reduce(0, +) }
  var adopted: Int { reports.map(\.adoptedFromStore).reduce(0, +) }
  var served: Int { reports.map(\.served).reduce(0, +) }
  var failed: Int { reports.map(\.failed).reduce(0, +) }
  var tokens: Set<String> { Set(reports.flatMap(\.tokens)) }
  /// The first save of a new model that returned, in any process.
  var firstSave: UInt64? { reports.compactMap(\.savedNanos).min() }
  /// When the last process served its first caller.
  var lastFirstServed: UInt64 { reports.map(\.firstServedNanos).max() ?? 0 }

  /// From the (first) save of a new model to the last process serving a new model, in ms.
  var spreadMs: Double? {
    guard let firstSave, lastFirstServed > 0 else { return nil }
    return (Double(lastFirstServed) - Double(firstSave)) / 1e6
  }

  /// From the holder's save to its `release` returning, in ms (lease only). The release is
  /// visible to the others when its rename lands, before the directory fsync that ends it.
  var releaseMs: Double? {
    guard let firstSave, let released = reports.compactMap(\.releasedNanos).min() else {
      return nil
    }
    return (Double(released) - Double(firstSave)) / 1e6
  }

  /// From `go` to the last process serving a new model, in ms.
  var totalMs: Double { (Double(lastFirstServed) - Double(goNanos)) / 1e6 }
}

enum CrossProcess {
  /// How long the parent waits for every child's `ready`, then for every report.
  static let timeout: Duration = .seconds(60)
  /// The access token of the expired model the parent seeds.
  static let expiredToken = "b8-expired-seed"

  /// Seeds a fresh store with an expired model, starts `processes` children on it, lets them go
  /// together and collects their reports. The waiting for the children blocks: it runs on a
  /// Dispatch queue, never on the concurrency pool.
  static func run(
    _ mode: CrossProcessMode, processes: Int, callers: Int
  ) async throws -> CrossProcessRun {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("authcoord-bench-b8-\(UUID().uuidString)", isDirectory: true)
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appendingPathComponent("tokens.store")
    let expired = AuthModel(
      uid: "2088seed", accessToken: expiredToken, mcUid: CrossProcessChild.key.account,
      expiresAt: Date().addingTimeInterval(-3600))
    try await FileTokenStore(url: url).save(expired, for: CrossProcessChild.key)
    let arguments = [url.path, "\(callers)", mode.childArgument]
    let result: Result<CrossProcessRun, HarnessFailure> = await withCheckedContinuation {
      continuation in
      DispatchQueue.global().async {
        do {
          let run = try runChildren(arguments, processes: processes)
          continuation.resume(returning: .success(run))
        } catch let error as HarnessFailure {
          continuation.resume(returning: .failure(error))
        } catch {
          continuation.resume(returning: .failure(HarnessFailure(description: "\(error)")))
        }
      }
    }
    return try result.get()
  }

  #if os(Linux) || os(macOS)
    private static func runChildren(
      _ arguments: [String], processes: Int
    ) throws -> CrossProcessRun {
      signal(SIGPIPE, SIG_IGN)
      var children: [(process: Process, input: FileHandle, output: LineReader)] = []
      defer {
        for child in children where child.process.isRunning { child.process.terminate() }
        for child in children { child.process.waitUntilExit() }
      }
      for _ in 0..<processes {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executablePath)
        process.arguments = [CrossProcessChild.flag] + arguments
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        children.append(
          (process, input.fileHandleForWriting, LineReader(output.fileHandleForReading)))
      }
      let readyBy = nowNanos() + nanos(timeout)
      for (index, child) in children.enumerated() {
        let line = child.output.line(before: readyBy)
        guard line == "ready" else {
          throw HarnessFailure(
            description: "B8 child \(index) said \(line.map { "\"\($0)\"" } ?? "nothing") "
              + "instead of ready")
        }
      }
      let go = realtimeNanos()
      for child in children { try child.input.write(contentsOf: Data("go\n".utf8)) }
      let reportBy = nowNanos() + nanos(timeout)
      var reports: [CrossProcessChild.Report] = []
      for (index, child) in children.enumerated() {
        guard let line = child.output.line(before: reportBy) else {
          throw HarnessFailure(description: "B8 child \(index) did not report within \(timeout)")
        }
        do {
          reports.append(
            try JSONDecoder().decode(CrossProcessChild.Report.self, from: Data(line.utf8)))
        } catch {
          throw HarnessFailure(description: "B8 child \(index) reported \"\(line)\"")
        }
      }
      for child in children { try? child.input.close() }
      for (index, child) in children.enumerated() {
        child.process.waitUntilExit()
        if child.process.terminationStatus != 0 {
          throw HarnessFailure(
            description: "B8 child \(index) exited with \(child.process.terminationStatus)")
        }
      }
      return CrossProcessRun(reports: reports, goNanos: go)
    }

    /// This executable: children are copies of the bench.
    private static var executablePath: String {
      #if os(Linux)
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if count > 0 {
          return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
      #endif
      let first = CommandLine.arguments[0]
      if first.hasPrefix("/") { return first }
      return FileManager.default.currentDirectoryPath + "/" + first
    }
  #else
    private static func runChildren(
      _ arguments: [String], processes: Int
    ) throws -> CrossProcessRun {
      throw HarnessFailure(description: "B8 needs child processes (Linux or macOS)")
    }
  #endif

  private static func nanos(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
  }
}

/// Reads a child's stdout line by line, waiting at most until a deadline (`nowNanos`).
final class LineReader {
  private let handle: FileHandle
  private var buffer: [UInt8] = []

  init(_ handle: FileHandle) { self.handle = handle }

  /// The next line without its newline, or nil on end of file or at the deadline.
  func line(before deadline: UInt64) -> String? {
    while true {
      if let newline = buffer.firstIndex(of: 10) {
        let line = String(decoding: buffer[..<newline], as: UTF8.self)
        buffer.removeSubrange(...newline)
        return line
      }
      let now = nowNanos()
      guard now < deadline else { return nil }
      var descriptor = pollfd(fd: handle.fileDescriptor, events: Int16(POLLIN), revents: 0)
      let ready = poll(&descriptor, 1, Int32(min((deadline - now) / 1_000_000 + 1, 60_000)))
      if ready < 0 && errno == EINTR { continue }
      guard ready > 0 else { return nil }
      var chunk = [UInt8](repeating: 0, count: 4096)
      let count = read(handle.fileDescriptor, &chunk, chunk.count)
      if count < 0 && errno == EINTR { continue }
      guard count > 0 else { return nil }
      buffer.append(contentsOf: chunk[..<count])
    }
  }
}

extension Scenarios {
  /// B8: K processes x N callers on one expired stored model, with the lease and without.
  func crossProcess(_ results: inout Results) async throws {
    let processes = plan.processes
    let callers = plan.callersPerProcess
    let parameter = "K=\(processes) N=\(callers)"
    for rep in 0..<plan.reps {
      progress("B8 \(parameter) rep \(rep + 1)/\(plan.reps)")
      for mode in Stats.rotated(CrossProcessMode.allCases, by: rep) {
        let name = "B8 \(mode.rawValue) \(parameter) rep \(rep + 1)"
        let run: CrossProcessRun
        do {
          run = try await CrossProcess.run(mode, processes: processes, callers: callers)
        } catch {
          results.violation("\(name): \(error)")
          continue
        }
        let label = mode.rawValue
        results.add("B8", label, parameter, .authorizations, Double(run.authorizations))
        results.add("B8", label, parameter, .adoptions, Double(run.adopted))
        results.add("B8", label, parameter, .distinctTokens, Double(run.tokens.count))
        results.add("B8", label, parameter, .spreadMs, run.spreadMs ?? .nan)
        results.add("B8", label, parameter, .goToServedMs, run.totalMs)
        if let releaseMs = run.releaseMs {
          results.add("B8", label, parameter, .releaseMs, releaseMs)
        }
        check(name, mode, run, processes: processes, callers: callers, &results)
      }
    }
  }

  private func check(
    _ name: String, _ mode: CrossProcessMode, _ run: CrossProcessRun, processes: Int,
    callers: Int, _ results: inout Results
  ) {
    let expected = processes * callers
    if run.served != expected {
      let error = run.reports.compactMap(\.error).first.map { "; first error: \($0)" } ?? ""
      results.violation(
        "\(name): \(run.served) of \(expected) callers got a model (\(run.failed) failed)\(error)")
    }
    if run.tokens.contains(CrossProcess.expiredToken) {
      results.violation("\(name): a caller got the expired seeded model")
    }
    if run.spreadMs == nil {
      results.violation("\(name): no process saved a new model")
    }
    switch mode {
    case .lease:
      if run.authorizations != 1 {
        results.violation(
          "\(name): \(run.authorizations) authorizations across \(processes) processes, "
            + "expected exactly 1")
      }
      if run.tokens.count != 1 {
        results.violation(
          "\(name): callers got \(run.tokens.count) different tokens, expected one for all")
      }
    case .noLease:
      // Without the lease each process authorizes once (in-process coalescing still holds);
      // fewer when a process loads the store after another one saved.
      if run.authorizations > processes {
        results.violation(
          "\(name): \(run.authorizations) authorizations, at most \(processes) expected")
      }
      for report in run.reports
      where report.authorizationsStarted > 1 || report.tokens.count > 1 {
        results.violation(
          "\(name): process \(report.pid) authorized \(report.authorizationsStarted) times, "
            + "its callers got \(report.tokens.count) tokens")
      }
    }
  }
}
