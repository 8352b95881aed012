import AuthCoordinator
import Foundation
import Testing

extension ConcurrencySuites {
  /// Seeded randomized stress of 2-6 simulated processes sharing one store and one lease, on
  /// the real clock with short deadlines, against a token server that rotates refresh tokens
  /// (``SharedLeaseStressDriver``). The invariants are described in `docs/reliability.md`.
  ///
  /// `SHARED_STRESS_SEED=0x...` reuses a seed's script, `SHARED_STRESS_OPS=n` sets the length.
  ///
  /// Opt-in (`SHARED_STRESS=1`): it runs on the real clock and paces itself with real sleeps,
  /// so on a loaded 2-core machine its timings are the scheduler's. The same invariants are
  /// checked deterministically, on a virtual clock with every interleaving a seed away, by the
  /// fleet simulation (`authcoord simulate --fleet`: 10,000 seeds in CI, and
  /// `SimulateFleetTests` in `swift test`); this stress stays as a real-clock soak.
  @Suite(.enabled(if: ProcessInfo.processInfo.environment["SHARED_STRESS"] == "1"))
  struct SharedLeaseStressTests {
    @Test(.timeLimit(.minutes(10)))
    func processesSharingALeaseKeepEveryInvariant() async {
      let parameters = SharedStressParameters.fromEnvironment()
      print("SharedLeaseStress: starting, \(parameters)")
      let report = await SharedLeaseStressDriver(parameters).run()
      print(report.summary)
      #expect(report.drained)
      #expect(
        report.violationCount == 0,
        """
        \(report.violationCount) invariant violation(s), \(parameters):
        \(report.violations.joined(separator: "\n"))
        """)
    }

    /// The same run with pauses (``SharedStressPauses``): a process stops for 1.2-2 times its
    /// lease's time to live just after a grant, during a re-read under the lease, during a
    /// renewal, through a retry's back-off after the token server's 503, and (counted apart)
    /// after its token request left. A refresh token spent twice is allowed only inside the
    /// contract's stated window: its first spend's response held back, after the request
    /// left, by a pause longer than the time to live. Every kind of pause must have fired.
    ///
    /// `SHARED_STRESS_PAUSE_OPS=n` sets the length (default 2,000).
    @Test(.timeLimit(.minutes(10)))
    func processesPausedPastTheirLeaseReuseNoTokenOutsideTheStatedWindow() async {
      let parameters = SharedStressParameters.fromEnvironment(pauses: true)
      print("SharedLeaseStress: starting, \(parameters)")
      let report = await SharedLeaseStressDriver(parameters).run()
      print(report.summary)
      #expect(report.drained)
      #expect(report.reusesOutsideWindow == 0, "\(report.pausesLine), \(parameters)")
      // Watched (2026-12-04, docs/reliability.md): with pauses and failed saves, once in 7 runs
      // after the seams fixes the store ended on an older token of a live family (a rotation
      // lost). Its cause found (a save retry stopped when its hold was lost to failed renewals;
      // `LostHoldSaveTests`) and fixed; 0 in the runs since. Reported as a known intermittent
      // issue until enough runs show no other invariant breaks under pauses.
      let others = report.violations.filter { !$0.hasPrefix("[refresh token reuse]") }
      withKnownIssue(
        "an invariant other than reuse broke under pauses: open, see docs/reliability.md",
        isIntermittent: true
      ) {
        #expect(
          others.isEmpty,
          """
          \(report.violationCount) invariant violation(s), \(parameters):
          \(report.violations.joined(separator: "\n"))
          """)
      }
      for kind in parameters.pauseKinds {
        #expect(
          report.pauses.fired[kind, default: 0] > 0,
          "no \(kind.rawValue) pause fired: \(report.pausesLine), \(parameters)")
      }
      #expect(
        !parameters.pauseKinds.contains(.backOff) || report.pauses.backOffsRetried > 0,
        "no retry was scheduled during a back-off pause: \(report.pausesLine), \(parameters)")
    }
  }
}
