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
  /// a million operations; `STRESS_REFRESH`, `STRESS_LEASE`, `STRESS_LEASE_FAULTS`,
  /// `STRESS_SLOW_STORE`, `STRESS_WALL_STEPS`, `STRESS_SILENT` and `STRESS_ABANDON` turn on the
  /// variants, and `STRESS_EVENTS` prints a timeline with each of the first violations
  /// (``StressParameters``).
  @Suite struct RandomizedStressTests {
    @Test(.timeLimit(.minutes(60)))
    func randomizedOperationsKeepEveryInvariant() async {
      await run(StressParameters.fromEnvironment())
    }

    /// The same, with refresh tokens spent and checked, a lease that the clock's jumps pause
    /// past its time to live and 5 % of whose calls fail or stall, and a slow store whose
    /// deadline some operations pass: the seams between them meet the same faults on real
    /// threads (`docs/reliability.md`, "Variants").
    @Test(.timeLimit(.minutes(60)))
    func refreshTokensLeaseAndSlowStoreKeepEveryInvariant() async {
      var parameters = StressParameters.fromEnvironment()
      parameters.refreshTokens = true
      parameters.lease = true
      if parameters.leaseFaults == 0 { parameters.leaseFaults = 5 }
      if parameters.slowStore == 0 { parameters.slowStore = 10 }
      await run(parameters)
    }

    /// The same, with a silent authorizer that brings a refresh policy (refresh ahead, retries
    /// after a back-off, remembered failures, stale-if-error), refresh tokens, a wall clock that
    /// steps, and abandoned flights left to finish.
    @Test(.timeLimit(.minutes(60)))
    func silentRefreshesWallClockStepsAndFinishedFlightsKeepEveryInvariant() async {
      var parameters = StressParameters.fromEnvironment()
      parameters.silent = true
      parameters.refreshTokens = true
      parameters.wallSteps = true
      parameters.finishAbandoned = true
      await run(parameters)
    }

    private func run(_ parameters: StressParameters) async {
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
