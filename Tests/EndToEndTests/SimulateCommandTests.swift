import Foundation
import Testing

/// `authcoord simulate`, run as a subprocess: the demo installs a process-wide executor hook
/// (its virtual world), so it never runs inside the test process.
@Suite("authcoord simulate", .timeLimit(.minutes(5)))
struct SimulateCommandTests {
  /// Runs `authcoord simulate` with `arguments`; returns its exit status and output.
  private static func simulate(_ arguments: [String]) async throws -> (
    status: Int32, out: String, err: String
  ) {
    try await AuthcoordProcess.run(["simulate"] + arguments)
  }

  @Test("--processes 3: the app and two widgets share one authorization per user")
  func threeProcessesShareOneAuthorization() async throws {
    let run = try await Self.simulate([
      "--processes", "3", "--opens", "200", "--speedup", "1000000",
    ])
    #expect(run.status == 0, "\(run.err)")
    let lines = run.out.split(separator: "\n").map(String.init)
    // The app's flight bounces to Alipay at the cold start and refreshes silently at the
    // expiry; the widgets wait for the lease and adopt the model the app stored.
    #expect(lines.filter { $0.contains("the user is sent to Alipay") }.count == 1)
    #expect(
      lines.contains { $0.hasSuffix("app took user-1's lease: it authorizes for every process") })
    for widget in ["widget-2", "widget-3"] {
      #expect(
        lines.filter {
          $0.hasSuffix("\(widget) adopted the model the app stored for user-1 (flight #1)")
        }
        .count == 1)
      #expect(
        lines.contains {
          $0.hasSuffix("\(widget) found user-1's lease held by the app: waits for its result")
        })
      #expect(
        lines.contains {
          $0
            == "  \(widget) ..................... 600 served; 0 authorization(s), 2 adopted from the store"
        })
    }
    #expect(lines.contains("  authorizations ............... 2"))
    #expect(lines.contains("  bounces to Alipay ............ 1"))
    #expect(lines.contains("  silent refreshes ............. 1"))
    #expect(
      lines.contains(
        "  app .......................... 600 served; 2 authorization(s), 0 adopted from the store")
    )
    #expect(
      lines.contains(
        "  one authorization per user ... yes: one per user per wave that needed one, in 3 processes (2 for 1 user(s))"
      ))
    #expect(lines.last == "Result: as expected")
  }

  @Test("the default run: one bounce per sign-in, none per expiry or outage (issue 36)")
  func expiriesAreRefreshedSilentlyAndOnlyTheUserCanEndAFamily() async throws {
    let run = try await Self.simulate(["--quiet", "--speedup", "1000000", "--opens", "200"])
    #expect(run.status == 0, "\(run.err)")
    let lines = run.out.split(separator: "\n").map(String.init)
    for line in [
      "  bounces to Alipay ............ 3", "  token exchanges .............. 3",
      "  silent refreshes ............. 4", "  refresh-token reuses ......... 0",
      "  cold start: 200 served, 1 bounce(s)", "  after expiry: 200 served, 0 bounce(s)",
      "  after expiry 3: 200 served, 0 bounce(s)",
      "  server down: 0 served, 200 failed with refresh_failed, 0 bounce(s)",
      "  server still down, 1 s later: 0 served, 200 failed with refresh_failed, 0 bounce(s)",
      "  server back: 200 served, 0 bounce(s)", "  family ended: 200 served, 1 bounce(s)",
      "  cancelled in Alipay, NeedRefreshToken: 1 served, 1 bounce(s)",
      "Result: as expected",
    ] {
      #expect(lines.contains(line), "no '\(line)' in\n\(run.out)")
    }
  }

  @Test("--processes 3 --users 2 --quiet: one authorization per user per wave, summary only")
  func twoUsersInThreeProcesses() async throws {
    let run = try await Self.simulate([
      "--processes", "3", "--users", "2", "--opens", "50", "--quiet", "--speedup", "1000000",
    ])
    #expect(run.status == 0, "\(run.err)")
    #expect(!run.out.contains("["))  // no timeline
    #expect(run.out.contains("  authorizations ............... 4\n"))
    #expect(run.out.contains("(4 for 2 user(s))"))
    #expect(run.out.hasSuffix("Result: as expected\n"))
  }

  @Test("bad --processes values exit 2", arguments: [["0"], ["x"], ["65"], ["-1"], []])
  func badProcessCountsExitTwo(_ value: [String]) async throws {
    let run = try await Self.simulate(["--processes"] + value)
    #expect(run.status == 2)
    #expect(run.out.isEmpty)
    #expect(run.err.contains("authcoord simulate: --processes"))
    #expect(run.err.contains("usage: authcoord simulate"))
  }

  @Test("--help describes --processes")
  func helpMentionsProcesses() async throws {
    let run = try await Self.simulate(["--help"])
    #expect(run.status == 0)
    #expect(run.out.contains("--processes N"))
  }
}
