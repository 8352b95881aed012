import AuthCoordinator
import Testing

extension ConcurrencySuites {
  /// Seeded randomized stress of 2-6 simulated processes sharing one store and one lease, on
  /// the real clock with short deadlines, against a token server that rotates refresh tokens
  /// (``SharedLeaseStressDriver``). The invariants are described in `docs/reliability.md`.
  ///
  /// `SHARED_STRESS_SEED=0x...` reuses a seed's script, `SHARED_STRESS_OPS=n` sets the length.
  @Suite struct SharedLeaseStressTests {
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
  }
}
