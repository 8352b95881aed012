import AuthCoordinator
import Testing

extension ConcurrencySuites {
  /// Seeded randomized stress of the coordinator: many keys, many operations, every fault.
  ///
  /// The invariants and how each is checked are described in `docs/reliability.md`; the checks
  /// live in ``StressLedger`` (per call), ``ChaosAuthorizer`` (one authorization in flight per
  /// key) and ``StressDriver`` (hangs, statistics).
  ///
  /// `STRESS_SEED=0x...` replays a seed, `STRESS_OPS=n` sets the length, `STRESS_SOAK=1` runs
  /// a million operations.
  @Suite struct RandomizedStressTests {
    @Test(.timeLimit(.minutes(60)))
    func randomizedOperationsKeepEveryInvariant() async {
      let parameters = StressParameters.fromEnvironment()
      print("RandomizedStress: starting, \(parameters)")
      let report = await StressDriver(parameters).run()
      print(report.summary)
      #expect(report.calls >= parameters.operations / 2)
      #expect(
        report.violationCount == 0,
        """
        \(report.violationCount) invariant violation(s), \(parameters):
        \(report.violations.joined(separator: "\n"))
        """)
    }
  }
}
