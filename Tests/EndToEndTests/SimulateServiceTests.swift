import Foundation
import Testing

/// `authcoord simulate --service`, run as a subprocess (the demo installs a process-wide
/// executor hook, its virtual world, so it never runs inside the test process): a service whose
/// concurrent requests share one token through the real coordinator, OAuth2Authorizer and
/// BearerClient, against the TestKit's simulated OAuth 2 token server and simulated API (HTTP
/// transports in process).
@Suite("authcoord simulate --service", .timeLimit(.minutes(5)))
struct SimulateServiceTests {
  /// Runs `authcoord simulate` with `arguments`; returns its exit status and output.
  private static func simulate(_ arguments: [String]) async throws -> (
    status: Int32, out: String, err: String
  ) {
    try await AuthcoordProcess.run(["simulate"] + arguments)
  }

  /// The summary of a run with `r` requests per wave and `e` expiries: a cold start, `e`
  /// expiries, six revocations, the slow wave, the wave after it, a recovery, the flaky
  /// server's four waves, and phase 6's two (two audiences, then a wave after the sign-out):
  /// `e + 16` waves. One token request per wave but the one after the slow wave, which is
  /// served by the stopped refresh's stored result, the server-down wave in the window, whose
  /// background refresh is tried twice, and the two-audience wave, one per audience. With the
  /// defaults (2,000 and 100): 232,000 requests and 117 token requests, as the README says
  /// (`.ci/run` checks the default run's lines).
  static func expectedSummary(requests r: Int, expiries e: Int) -> [String] {
    let waves = e + 16
    return [
      "Summary",
      "  requests ..................... \(r * waves) in \(waves) waves",
      "  requests served .............. \(r * (waves - 1))",
      "  requests that failed ......... \(r) (all timed_out in the slow-endpoint wave)",
      "  retried after a 401 .......... \(6 * r) (each once, by BearerClient, after a forced refresh)",
      "  token requests ............... \(e + 17)",
      "  client_credentials grants .... 4",
      "  refresh_token grants ......... \(e + 10) (each rotated)",
      "  refresh-token reuses ......... 0",
      "  invalid_grant answers ........ 0",
      "  API answers 200 / 401 ........ \(r * (waves - 2)) / \(6 * r)",
      "  API revocations .............. 6",
      "  callers that shared a flight . \(r * (e + 14) - e - 15)",
      "  cache hits ................... \(8 * r + 2)",
      "  loop-guard back-offs ......... 3 (1 s, 2 s, 4 s)",
      "  timeouts ..................... 1 flight(s)",
      "  late results stored .......... 1 (never served to the callers that timed out)",
      "  adopted from the store ....... 1 flight(s)",
      "  refreshes ahead .............. 2 (the callers served from memory meanwhile)",
      "  retried token requests ....... 1 (after a back-off, in their flight)",
      "  stale answers ................ \(r) (unexpired token while the server was down)",
      "  token requests per audience .. https://billing.simulated.example 1, "
        + "https://orders.simulated.example 1",
      "  revocations at sign-out ...... 3 (RFC 7009, after the sign-out)",
      "  cold start: \(r) served",
      "  expiries (\(e) waves): \(r * e) served",
      "  revocation storm (6 waves): \(6 * r) served",
      "  slow endpoint: 0 served, \(r) failed with timed_out",
      "  after the slow wave: \(r) served",
      "  recovery: \(r) served",
      "  refresh ahead: \(r) served",
      "  window, server down: \(r) served",
      "  leeway, server down: \(r) served",
      "  server back: \(r) served",
      "  two audiences: \(r) served",
      "  after the sign-out: \(r) served",
      "Result: as expected",
    ]
  }

  // Smaller runs than the default (220,000 requests, seconds of CPU in the child, which slowed
  // the other tests of a full run on two cores); `.ci/run` runs the default one.
  @Test("--service --quiet: exit 0, the summary's counts, no timeline, no token")
  func quietSummary() async throws {
    let run = try await Self.simulate([
      "--service", "--quiet", "--requests", "200", "--expiries", "10",
    ])
    #expect(run.status == 0, "\(run.err)")
    #expect(run.err.isEmpty)
    #expect(
      run.out == "\n" + Self.expectedSummary(requests: 200, expiries: 10).joined(separator: "\n")
        + "\n")
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
    // Phase 5, the flaky server: a refresh ahead nobody waits for, a retry after the pinned
    // back-off (three quarters of 1 s), and the unexpired token served while the server is down.
    #expect(
      timeline.contains {
        $0.hasSuffix("refreshing reports-service ahead of expiry; callers keep the cached token")
      })
    #expect(
      timeline.contains {
        $0.hasSuffix("token_endpoint_error for reports-service; attempt 2 after 0.75 s")
      })
    #expect(
      timeline.contains { $0.contains("got the cached token, not yet expired (stale-if-error)") })
    #expect(
      timeline.contains {
        $0.hasSuffix(
          "refresh-ahead wave done in 0 s of virtual time: 200 served; the background refresh made 1 token request(s)"
        )
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
    // 1 cold start + 2 expiries + 6 revocations + slow, after it, recovery: 12 waves.
    #expect(
      run.out == "\n" + Self.expectedSummary(requests: 10, expiries: 2).joined(separator: "\n")
        + "\n")
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
