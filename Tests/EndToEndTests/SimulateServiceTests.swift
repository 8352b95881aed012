import Foundation
import Testing

/// `authcoord simulate --service`, run as a subprocess (the demo installs a process-wide
/// executor hook, its virtual world, so it never runs inside the test process): a service whose
/// concurrent requests share one token through the real coordinator, against a simulated OAuth 2
/// token server and a simulated API.
@Suite("authcoord simulate --service")
struct SimulateServiceTests {
  /// Runs `authcoord simulate` with `arguments`; returns its exit status and output.
  private static func simulate(_ arguments: [String]) async throws -> (
    status: Int32, out: String, err: String
  ) {
    try await AuthcoordProcess.run(["simulate"] + arguments)
  }

  /// The summary of a default run: 110 waves of 2,000 requests.
  static let defaultSummary = [
    "Summary",
    "  requests ..................... 220000 in 110 waves",
    "  requests served .............. 218000",
    "  requests that failed ......... 2000 (all timed_out in the slow-endpoint wave)",
    "  retried after a 401 .......... 12000 (each once, after a forced refresh)",
    "  token requests ............... 109",
    "  client_credentials grants .... 1",
    "  refresh_token grants ......... 108 (each rotated)",
    "  refresh-token reuses ......... 0",
    "  invalid_grant answers ........ 0",
    "  API answers 200 / 401 ........ 218000 / 12000",
    "  API revocations .............. 6",
    "  callers that shared a flight . 219890",
    "  cache hits ................... 12000",
    "  loop-guard back-offs ......... 3 (1 s, 2 s, 4 s)",
    "  timeouts ..................... 1 flight(s)",
    "  late results stored .......... 1 (never served to the callers that timed out)",
    "  adopted from the store ....... 1 flight(s)",
    "  cold start: 2000 served",
    "  expiries (100 waves): 200000 served",
    "  revocation storm (6 waves): 12000 served (12000 after a retry)",
    "  slow endpoint: 0 served, 2000 failed with timed_out",
    "  after the slow wave: 2000 served",
    "  recovery: 2000 served",
    "Result: as expected",
  ]

  @Test("--service --quiet: exit 0, the summary's counts, no timeline, no token")
  func quietSummary() async throws {
    let run = try await Self.simulate(["--service", "--quiet"])
    #expect(run.status == 0, "\(run.err)")
    #expect(run.err.isEmpty)
    #expect(run.out == "\n" + Self.defaultSummary.joined(separator: "\n") + "\n")
    #expect(!run.out.contains("simulated-access") && !run.out.contains("simulated-refresh"))
  }

  @Test("--service: the same timeline on every run, with each phase in it")
  func timelineIsDeterministic() async throws {
    // A smaller run than the default (the summary test runs that one): the same phases.
    let arguments = ["--service", "--requests", "200", "--expiries", "3"]
    let first = try await Self.simulate(arguments)
    let second = try await Self.simulate(arguments)
    #expect(first.status == 0, "\(first.err)")
    #expect(second.status == 0, "\(second.err)")
    #expect(first.out == second.out)
    let lines = first.out.split(separator: "\n").map(String.init)
    let timeline = lines.filter { $0.hasPrefix("[") }
    #expect(timeline.count > 50)
    #expect(
      lines.contains(
        "[     0.200s] token server: client_credentials grant (token request #1): new token family #1"
      ))
    // The loop guard delays the 4th to 6th forced refresh of the storm: 1 s, 2 s, 4 s.
    let backOffs = timeline.filter { $0.contains("loop guard: the next token request") }
      .map { $0.components(separatedBy: "reports-service waits ").last ?? "" }
    #expect(backOffs == ["1 s", "2 s", "4 s"])
    // The slow wave fails at the deadline; its late result is stored and served to the next.
    #expect(
      timeline.contains {
        $0.hasSuffix("slow-endpoint wave done after 2 s: 0 served, 200 failed with timed_out")
      })
    // 1 cold start + 3 expiries + 6 revocations: the slow wave is flight #11.
    #expect(timeline.contains { $0.contains("the late result of flight #11 was stored") })
    #expect(
      timeline.contains {
        $0.hasSuffix("flight #12 adopted the model the stopped refresh stored (no token request)")
      })
    #expect(!first.out.contains("simulated-access") && !first.out.contains("simulated-refresh"))
    #expect(lines.last == "Result: as expected")
  }

  @Test("--requests and --expiries change the counts")
  func flagsChangeTheCounts() async throws {
    let run = try await Self.simulate([
      "--service", "--quiet", "--requests", "10", "--expiries", "2",
    ])
    #expect(run.status == 0, "\(run.err)")
    let lines = run.out.split(separator: "\n").map(String.init)
    // 1 cold start + 2 expiries + 6 revocations + slow, after it, recovery: 12 waves.
    #expect(lines.contains("  requests ..................... 120 in 12 waves"))
    #expect(lines.contains("  token requests ............... 11"))
    #expect(
      lines.contains(
        "  requests that failed ......... 10 (all timed_out in the slow-endpoint wave)"))
    #expect(lines.contains("  refresh-token reuses ......... 0"))
    #expect(lines.last == "Result: as expected")
  }

  @Test(
    "bad flags and combinations exit 2",
    arguments: [
      ["--service", "--processes", "3"], ["--service", "--opens", "5"],
      ["--service", "--never-return"], ["--service", "--refresh-loop"],
      ["--requests", "5"], ["--expiries", "3"], ["--service", "--requests", "0"],
      ["--service", "--expiries"], ["--service", "--token-lifetime", "60"],
      ["--service", "--authorization-timeout", "0.5"], ["--service", "--bogus"],
    ])
  func badFlagsExitTwo(_ arguments: [String]) async throws {
    let run = try await Self.simulate(arguments)
    #expect(run.status == 2)
    #expect(run.out.isEmpty)
    #expect(run.err.hasPrefix("authcoord simulate: "))
    #expect(run.err.contains("usage: authcoord simulate --service"))
  }

  @Test("--help describes --service and its flags")
  func helpMentionsService() async throws {
    let run = try await Self.simulate(["--help"])
    #expect(run.status == 0)
    for text in [
      "usage: authcoord simulate --service [options]", "SIMULATED OAuth 2 token server",
      "--requests N", "--expiries N",
    ] {
      #expect(run.out.contains(text), "\(text)")
    }
  }
}
