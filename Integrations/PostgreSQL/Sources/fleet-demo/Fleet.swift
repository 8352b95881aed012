import AuthCoordinator
import AuthCoordinatorPostgreSQL
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The parent: seeds an expired model, starts the replicas, releases them at once, optionally
/// kills the one that authorizes, and judges what happened.
enum Fleet {
  struct Summary: Codable {
    var replicas: Int
    var callersPerReplica: Int
    var authorizations: Int
    var refreshTokenReuses: Int
    var revokedFamilies: Int
    /// Calls made (callers × 1, or more in a soak).
    var calls: Int
    var soakSeconds: Int
    var distinctTokens: Int
    var served: Int
    var failed: Int
    var killedReplica: Int?
    /// Seconds from the kill to the next authorization's start (with `--kill-holder`).
    var takeoverSeconds: Double?
    /// Callers' latencies over the fleet, in milliseconds.
    var latencyP50: Double
    var latencyP99: Double
    /// Seconds from the end of the authorization to the last caller served, fleet-wide.
    var lastServedAfterAuthorization: Double?
    var ok: Bool
  }

  static func run(_ options: Options) async throws -> Bool {
    let directory = try makeDirectory()
    defer { try? FileManager.default.removeItem(at: directory) }
    let schema = "fleet_" + UUID().uuidString.lowercased().prefix(8)
    let key = AccountKey(account: options.account)

    // The model every replica finds: expired, with the refresh token the provider issued last.
    let database = try await PostgresDatabase(
      PostgresConfiguration(connectionString: options.connection, schema: schema, poolSize: 1))
    let first = try SimulatedIdentityProvider.reset(in: directory, account: options.account)
    try await PostgresTokenStore(database: database).save(first, for: key)
    database.close()

    let epoch = Date()
    let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var children: [Process] = []
    for index in 0..<options.replicas {
      let child = Process()
      child.executableURL = executable
      child.arguments = options.replicaArguments(
        index: index, directory: directory.path, schema: schema,
        epoch: epoch.timeIntervalSince1970)
      try child.run()
      children.append(child)
    }
    log(
      options, epoch,
      "started \(options.replicas) replicas × \(options.callers) callers, schema \(schema)"
        + (options.soakSeconds > 0
          ? ", rotation soak of \(options.soakSeconds) s with \(options.lifetimeMilliseconds) ms tokens"
          : ""))
    try waitFor(seconds: 60, "the replicas to be ready") {
      (0..<options.replicas).allSatisfy { exists(directory, "ready-\($0)") }
    }
    _ = FileManager.default.createFile(
      atPath: directory.appending(path: "go").path, contents: Data())
    log(options, epoch, "all ready; go")

    var killed: Int?
    var killedAt: Double?
    if options.killHolder {
      try waitFor(seconds: 30, "a replica to start authorizing") {
        (0..<options.replicas).contains { exists(directory, "authorizing-\($0)") }
      }
      let holder = (0..<options.replicas).first { exists(directory, "authorizing-\($0)") }!
      kill(children[holder].processIdentifier, SIGKILL)
      killed = holder
      killedAt = Date().timeIntervalSince(epoch)
      log(options, epoch, "SIGKILL replica \(holder) (it was authorizing)")
    }
    for child in children { child.waitUntilExit() }

    let state = try SimulatedIdentityProvider.read(in: directory)
    var results: [Replica.Result] = []
    for index in 0..<options.replicas where index != killed {
      let data = try Data(contentsOf: directory.appending(path: "result-\(index).json"))
      results.append(try JSONDecoder().decode(Replica.Result.self, from: data))
    }
    for result in results.sorted(by: { ($0.firstServed ?? 0) < ($1.firstServed ?? 0) }) {
      var line =
        "replica \(result.replica): \(result.served) served from \(format(result.firstServed)) to "
        + "\(format(result.lastServed)), \(result.failedCalls) failed"
      if let first = result.failed.first { line += " (first: \(first))" }
      if let last = result.lastFailure, result.failedCalls > 1 {
        line += "; the last at \(format(result.lastFailed)): \(last)"
      }
      log(options, epoch, line)
    }
    let latencies = results.flatMap(\.latencies).sorted()
    let tokens = Set(results.flatMap(\.tokens))
    let served = results.reduce(0) { $0 + $1.served }
    let expected = results.reduce(0) { $0 + $1.calls }
    var summary = Summary(
      replicas: options.replicas, callersPerReplica: options.callers,
      authorizations: state.issued, refreshTokenReuses: state.reuses,
      revokedFamilies: state.revokedFamilies, calls: expected, soakSeconds: options.soakSeconds,
      distinctTokens: tokens.count,
      served: served, failed: expected - served, killedReplica: killed,
      takeoverSeconds: killedAt.flatMap { kill in
        state.started.first { $0 > kill }.map { $0 - kill }
      },
      latencyP50: percentile(latencies, 0.5), latencyP99: percentile(latencies, 0.99),
      lastServedAfterAuthorization: state.finished.last.flatMap { done in
        results.compactMap(\.lastServed).max().map { $0 - done }
      }, ok: false)
    // Once: one authorization and one token fleet-wide. A soak: tokens rotated (more than one
    // authorization), none spent twice, the family never revoked, every call served.
    let authorizationsOK =
      options.soakSeconds > 0
      ? summary.authorizations > 1 : summary.authorizations == 1 && summary.distinctTokens == 1
    summary.ok =
      authorizationsOK && summary.refreshTokenReuses == 0 && summary.revokedFamilies == 0
      && summary.failed == 0 && expected > 0
    if options.json {
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys]
      print(String(decoding: try encoder.encode(summary), as: UTF8.self))
    } else {
      print(
        """
        summary
          authorizations ............... \(summary.authorizations) (the simulated provider's count)
          refresh-token reuses ......... \(summary.refreshTokenReuses)
          revoked families ............. \(summary.revokedFamilies)
          distinct tokens served ....... \(summary.distinctTokens)
          callers served ............... \(summary.served) of \(expected)
          caller latency p50 / p99 ..... \(format(ms: summary.latencyP50)) / \(format(ms: summary.latencyP99))
        """)
      if let takeover = summary.takeoverSeconds {
        print(
          "  takeover after the kill ...... \(format(takeover)) (lease TTL \(options.timeToLiveMilliseconds) ms)"
        )
      }
      if options.soakSeconds > 0 {
        print("  rotation soak passed .......... \(summary.ok ? "yes" : "NO")")
      } else {
        print("  one authorization for the fleet ... \(summary.ok ? "yes" : "NO")")
      }
    }
    return summary.ok
  }

  private static func makeDirectory() throws -> URL {
    let directory = FileManager.default.temporaryDirectory.appending(
      path: "fleet-demo-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    return directory
  }

  private static func exists(_ directory: URL, _ name: String) -> Bool {
    FileManager.default.fileExists(atPath: directory.appending(path: name).path)
  }

  /// Polls `condition` every 2 ms (the demo's driver waits for its child processes' files).
  private static func waitFor(seconds: Double, _ what: String, _ condition: () -> Bool) throws {
    let deadline = Date(timeIntervalSinceNow: seconds)
    while !condition() {
      guard Date() < deadline else { throw DemoError("timed out waiting for \(what)") }
      usleep(2_000)
    }
  }

  private static func percentile(_ sorted: [Double], _ fraction: Double) -> Double {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * fraction + 0.5))]
  }

  private static func log(_ options: Options, _ epoch: Date, _ line: String) {
    guard !options.json else { return }
    print("\(format(Date().timeIntervalSince(epoch)))  \(line)")
  }

  private static func format(_ seconds: Double?) -> String {
    guard let seconds else { return "-" }
    return String(format: "%7.3f s", seconds)
  }

  private static func format(ms: Double) -> String { String(format: "%.1f ms", ms) }
}

struct DemoError: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
