import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

// The summary of `authcoord simulate --service`: counts only, never a token.
extension ServiceScenario {
  /// The summary and whether every check held.
  func report() -> Simulation.Report {
    var total = ServiceTally()
    for wave in waves { total.add(wave.tally) }
    let server = tokenServer.counters
    let api = resource.counters
    let stats = coordinator.statistics
    let slowWave = waves.first { $0.name == "slow endpoint" }?.tally
    let failedText: String
    if total.failed > 0, total.failed == slowWave?.count(.timedOut) {
      failedText = "\(total.failed) (all timed_out in the slow-endpoint wave)"
    } else if total.failed > 0 {
      failedText =
        "\(total.failed) ("
        + total.failures.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
        .joined(separator: ", ") + ")"
    } else {
      failedText = "0"
    }
    let delays = timeline.backOffDelays.map(ServiceSimulation.seconds).joined(separator: ", ")

    var lines = ["", "Summary"]
    func line(_ label: String, _ value: String) {
      lines.append(
        "  " + (label + " ").padding(toLength: 30, withPad: ".", startingAt: 0) + " " + value)
    }
    line("requests", "\(total.served + total.failed) in \(waves.count) waves")
    line("requests served", "\(total.served)")
    line("requests that failed", failedText)
    line(
      "retried after a 401",
      "\(waves.map(\.unauthorized).reduce(0, +)) (each once, by BearerClient, after a forced refresh)"
    )
    line("token requests", "\(server.tokenRequests)")
    line("client_credentials grants", "\(server.clientCredentialsGrants)")
    line("refresh_token grants", "\(server.refreshTokenGrants) (each rotated)")
    line("refresh-token reuses", "\(server.reuses)")
    line("invalid_grant answers", "\(server.invalidGrants)")
    line("API answers 200 / 401", "\(api.ok) / \(api.unauthorized)")
    line("API revocations", "\(api.revocations)")
    line("callers that shared a flight", "\(stats.coalescedCallers)")
    line("cache hits", "\(stats.cacheHits)")
    line(
      "loop-guard back-offs",
      "\(stats.refreshLoopBackoffs)" + (delays.isEmpty ? "" : " (\(delays))"))
    line("timeouts", "\(stats.flightsTimedOut) flight(s)")
    line(
      "late results stored",
      "\(stats.lateResultsSaved) (never served to the callers that timed out)")
    line("adopted from the store", "\(stats.adoptedFromStore) flight(s)")
    line("refreshes ahead", "\(stats.refreshesAhead) (the callers served from memory meanwhile)")
    line("retried token requests", "\(stats.retriesScheduled) (after a back-off, in their flight)")
    line("stale answers", "\(stats.staleServed) (unexpired token while the server was down)")
    line("token requests per audience", audienceText.isEmpty ? "none" : audienceText)
    line("revocations at sign-out", "\(signOutRevocations) (RFC 7009, after the sign-out)")
    for (phase, tally, count) in phases {
      lines.append("  \(phase)\(count > 1 ? " (\(count) waves)" : ""): \(tally.text)")
    }
    let failedChecks = checks.filter { !$0.1 }
    for (what, _) in failedChecks { lines.append("  NOT as expected: \(what)") }
    lines.append(failedChecks.isEmpty ? "Result: as expected" : "Result: NOT as expected")
    return Simulation.Report(summary: lines.joined(separator: "\n"), asExpected: asExpected)
  }

  /// The waves summed up by phase, in order: the expiries together, the revocations together.
  var phases: [(String, ServiceTally, Int)] {
    var phases: [(String, ServiceTally, Int)] = []
    for wave in waves {
      let phase =
        wave.name.hasPrefix("expiry ")
        ? "expiries" : wave.name.hasPrefix("revocation ") ? "revocation storm" : wave.name
      if let last = phases.last, last.0 == phase {
        var tally = last.1
        tally.add(wave.tally)
        phases[phases.count - 1] = (phase, tally, last.2 + 1)
      } else {
        phases.append((phase, wave.tally, 1))
      }
    }
    return phases
  }
}
