import Foundation
import Testing

/// Replicas as processes: the `fleet-demo` executable of this package, run as a user would
/// run it (its parent starts the replica processes; the identity provider is SIMULATED, a file
/// the replicas share under flock). Each test reads the demo's JSON summary.
@Suite(
  "Replica processes", .enabled(if: TestServer.isAvailable), .serialized, .timeLimit(.minutes(3)))
struct FleetProcessTests {
  struct Summary: Decodable {
    var authorizations: Int
    var refreshTokenReuses: Int
    var revokedFamilies: Int
    var calls: Int
    var distinctTokens: Int
    var served: Int
    var failed: Int
    var killedReplica: Int?
    var takeoverSeconds: Double?
    var ok: Bool
  }

  @Test(
    "6 replica processes × 500 callers on an expired model: 1 authorization fleet-wide, one token")
  func sixReplicas() async throws {
    let summary = try await Self.runDemo(["--replicas", "6", "--callers", "500"])
    #expect(summary.authorizations == 1)
    #expect(summary.refreshTokenReuses == 0)
    #expect(summary.distinctTokens == 1)
    #expect(summary.served == 3000 && summary.failed == 0)
    #expect(summary.ok)
  }

  @Test(
    "the replica holding the lease is SIGKILLed mid-authorization: another takes over within the time to live"
  )
  func killedHolder() async throws {
    let summary = try await Self.runDemo(
      [
        "--replicas", "4", "--callers", "200", "--kill-holder", "--ttl-ms", "1000", "--delay-ms",
        "500",
      ])
    #expect(summary.killedReplica != nil)
    // The killed holder had not spent the token (its provider call was in its delay), so the
    // fleet still made exactly one completed authorization.
    #expect(summary.authorizations == 1)
    #expect(summary.refreshTokenReuses == 0)
    #expect(summary.served == 600 && summary.failed == 0)
    let takeover = try #require(summary.takeoverSeconds)
    // The lease lapses 1 s after the holder's last renewal (at most 1 s before the kill); the
    // bound leaves room for a busy machine.
    #expect(takeover <= 1.0 + 3.0, "took over after \(takeover) s")
  }

  @Test(
    "a rotation soak across 6 replica processes: tokens expire every second for 8 s, 0 reuses, 0 revoked families"
  )
  func rotationSoak() async throws {
    let summary = try await Self.runDemo(
      [
        "--replicas", "6", "--callers", "20", "--soak-seconds", "8", "--lifetime-ms", "1000",
        "--delay-ms", "50",
      ])
    // The provider accepts only its newest refresh token and revokes the family otherwise, so
    // one replica refreshing without the lease, or with a stale token, fails this (without the
    // lease a 5 s run of the demo made 388 reuses).
    #expect(summary.refreshTokenReuses == 0)
    #expect(summary.revokedFamilies == 0)
    #expect(summary.calls > 6 * 20 && summary.failed == 0)
    // Tokens living 1 s, refreshed 0.2 s before expiry, for 8 s: about 10 rotations, one each
    // fleet-wide; a busy machine makes fewer, never more than one per replica per token.
    #expect(summary.authorizations >= 3, "\(summary.authorizations) authorizations")
    #expect(summary.authorizations <= 8 * 6, "\(summary.authorizations) authorizations")
    #expect(summary.ok)
  }

  @Test("the demo refuses bad flags with exit 2")
  func badFlags() async throws {
    for arguments in [
      ["--replicas", "0"], ["--callers", "x"], ["--nope"], ["--soak-seconds", "-1"],
      ["--lifetime-ms", "10"],
    ] {
      let (status, _) = try await Self.run(arguments)
      #expect(status == 2, "\(arguments)")
    }
  }

  static func runDemo(_ arguments: [String]) async throws -> Summary {
    let (status, output) = try await run(arguments + ["--json"])
    let line = try #require(output.split(separator: "\n").last, "no output (exit \(status))")
    let summary = try JSONDecoder().decode(Summary.self, from: Data(line.utf8))
    #expect(status == (summary.ok ? 0 : 1))
    return summary
  }

  /// Runs fleet-demo and returns its exit status and standard output; the wait happens on a
  /// thread of its own, never on the cooperative pool.
  static func run(_ arguments: [String]) async throws -> (Int32, String) {
    let executable = try #require(demoURL, "fleet-demo not found next to the test runner")
    return try await withCheckedThrowingContinuation { continuation in
      Thread {
        do {
          let process = Process()
          process.executableURL = executable
          process.arguments = arguments
          let pipe = Pipe()
          process.standardOutput = pipe
          process.standardError = FileHandle.nullDevice
          try process.run()
          let output = pipe.fileHandleForReading.readDataToEndOfFile()
          process.waitUntilExit()
          continuation.resume(
            returning: (process.terminationStatus, String(decoding: output, as: UTF8.self)))
        } catch {
          continuation.resume(throwing: error)
        }
      }.start()
    }
  }

  static let demoURL: URL? = {
    var candidates: [URL] = []
    let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(runner.deletingLastPathComponent().appending(path: "fleet-demo"))
    for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
      candidates.append(bundle.bundleURL.deletingLastPathComponent().appending(path: "fleet-demo"))
    }
    return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
  }()
}
