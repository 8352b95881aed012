/// One target of docs/benchmarks.md ("Targets checked by the program"), evaluated on this
/// run's numbers.
struct TargetResult: Codable, Sendable {
  enum Status: String, Codable, Sendable {
    case pass = "PASS"
    case miss = "MISS"
    case skip = "SKIP"
  }

  enum Comparison: String, Codable, Sendable {
    case atMost = "<="
    case atLeast = ">="
    case exactly = "=="
  }

  var scenario: String
  var description: String
  /// The median over repetitions (for an exact count: the worst repetition).
  var measured: Double?
  var comparison: Comparison
  var limit: Double
  var unit: String
  var status: Status
  var note: String?
}

/// The targets, encoded: ratios are per repetition (same run), then the median is compared.
struct Targets {
  let results: Results
  let plan: Plan
  let coordinatorMeasured: Bool

  private let baselinesWithWaiters: [Impl] = [.sharedTask, .callbackList, .serialBarrier]

  func evaluate() -> [TargetResult] {
    var rows: [TargetResult] = []
    let one = "tasks=1"
    let many = "tasks=64"
    rows.append(
      target(
        "B1", "64 tasks: coordinator ÷ lock read", .atMost, 1.1, "x",
        ratio("B1", .coordinator, .bareLock, many, .nsPerOp)))
    rows.append(
      target(
        "B1", "64 tasks: coordinator ÷ no sync (ref)", .atMost, 1.25, "x",
        ratio("B1", .coordinator, .noSync, many, .nsPerOp)))
    rows.append(
      target(
        "B1", "64 tasks: actor ÷ coordinator", .atLeast, 3, "x",
        ratio("B1", .plainActor, .coordinator, many, .nsPerOp)))
    rows.append(
      target(
        "B1", "64 tasks: actor+Task ÷ coordinator", .atLeast, 3, "x",
        ratio("B1", .sharedTask, .coordinator, many, .nsPerOp)))
    rows.append(
      target(
        "B1", "1 task: coordinator ÷ actor", .atMost, 1.5, "x",
        ratio("B1", .coordinator, .plainActor, one, .nsPerOp)))

    for n in plan.burstSizes {
      let parameter = "N=\(n)"
      rows.append(
        target(
          "B2", "\(parameter): authorizations", .exactly, 1, "",
          results.samples("B2", .coordinator, parameter, .authorizations)))
      rows.append(
        target(
          "B2", "\(parameter): wake-up ÷ fastest baseline", .atMost, 1.1, "x",
          ratioToBest("B2", parameter, .wakeNsPerWaiter)))
    }
    let largest = "N=\(plan.largestBurst)"
    rows.append(
      target(
        "B2", "\(largest): wake-up ÷ bare parked task", .atMost, 1.25, "x",
        ratio("B2", .coordinator, .parkedTask, largest, .wakeNsPerWaiter)))
    let bareTask = results.samples("B2", .parkedTask, largest, .bytesPerWaiter)
    let ours = results.samples("B2", .coordinator, largest, .bytesPerWaiter)
    let ownHeap = ours.flatMap { ours in bareTask.map { zip(ours, $0).map { $0 - $1 } } }
    rows.append(
      target(
        "B2", "\(largest): heap per waiter over a bare parked task", .atMost, 64,
        "B", ownHeap,
        note: "upper bound on the coordinator's own heap: includes any growth of "
          + "the caller's async frames"))
    rows.append(
      target(
        "B2", "\(largest): heap per parked caller ÷ lightest baseline", .atMost,
        1.25, "x", ratioToBest("B2", largest, .bytesPerWaiter)))

    for n in plan.burstSizes {
      rows.append(
        target(
          "B3", "N=\(n): authorizations", .exactly, 1, "",
          results.samples("B3", .coordinator, "N=\(n)", .authorizations)))
    }
    let cancelMicros = results.samples("B3", .coordinator, largest, .cancelNsPerCancel)?
      .map { $0 / 1_000 }
    rows.append(
      target(
        "B3", "\(largest): cost per cancellation (cancel issued included)",
        .atMost, 1.5, "µs", cancelMicros,
        note: plan.largestBurst < 100_000 ? "the target is set at N=100000" : nil))
    rows.append(
      target(
        "B3", "\(largest): cost per cancellation ÷ bare parked task cancellation",
        .atMost, 1.25, "x",
        ratio("B3", .coordinator, .parkedTask, largest, .cancelNsPerCancel)))
    let scale = "\(plan.largestBurst)/\(plan.smallestBurst)"
    rows.append(
      target(
        "B3", "cancellation cost per item, N \(scale)", .atMost, 1.5, "x",
        results.samples(
          "B7", .coordinator, "B3 cancellation \(scale)",
          .scaleRatio)))

    rows.append(
      target(
        "B4", "N=\(plan.stormSize): authorizations", .exactly, 1, "",
        results.samples(
          "B4", .coordinator, "N=\(plan.stormSize)",
          .authorizations)))
    rows.append(
      target(
        "B4", "N=\(plan.stormSize): wake-up ÷ fastest baseline", .atMost, 1.1, "x",
        ratioToBest("B4", "N=\(plan.stormSize)", .wakeNsPerWaiter)))

    let accounts = "\(plan.accounts)x\(plan.callersPerAccount)"
    rows.append(
      target(
        "B5", "\(accounts): authorizations", .exactly, Double(plan.accounts), "",
        results.samples("B5", .coordinator, accounts, .authorizations)))
    rows.append(
      target(
        "B5", "\(accounts): barrier ÷ coordinator (total time)", .atLeast, 2, "x",
        ratio("B5", .serialBarrier, .coordinator, accounts, .totalMs)))
    rows.append(
      target(
        "B5", "\(accounts): coordinator ÷ fastest baseline (total time)", .atMost, 1.2, "x",
        ratioToBest("B5", accounts, .totalMs)))
    rows.append(
      target(
        "B5", "\(accounts): heap per account authorizing ÷ lightest baseline", .atMost, 1.5, "x",
        ratioToBest("B5", accounts, .bytesPerAccount)))

    rows.append(
      target(
        "B7", "B2 wake-up per waiter, N \(scale)", .atMost, 1.5, "x",
        results.samples("B7", .coordinator, "B2 wake-up \(scale)", .scaleRatio)))
    rows.append(
      target(
        "B7", "B3 wake-up per waiter, N \(scale)", .atMost, 1.5, "x",
        results.samples("B7", .coordinator, "B3 wake-up \(scale)", .scaleRatio)))

    // Correctness only: B8's timings depend on process scheduling and have no target.
    let processes = "K=\(plan.processes) N=\(plan.callersPerProcess)"
    rows.append(
      target(
        "B8", "\(processes): authorizations across processes with the lease", .exactly, 1, "",
        results.samples("B8", CrossProcessMode.lease.rawValue, processes, .authorizations)))
    return rows
  }

  /// Per-repetition `numerator ÷ denominator`.
  private func ratio(
    _ scenario: String, _ numerator: Impl, _ denominator: Impl, _ parameter: String,
    _ metric: Metric
  ) -> [Double]? {
    guard let top = results.samples(scenario, numerator, parameter, metric),
      let bottom = results.samples(scenario, denominator, parameter, metric)
    else { return nil }
    return Stats.ratios(top, bottom)
  }

  /// Per-repetition coordinator ÷ the best (lowest) baseline of that same repetition.
  private func ratioToBest(_ scenario: String, _ parameter: String, _ metric: Metric)
    -> [Double]?
  {
    guard let ours = results.samples(scenario, .coordinator, parameter, metric) else {
      return nil
    }
    let theirs = baselinesWithWaiters.compactMap {
      results.samples(scenario, $0, parameter, metric)
    }
    guard !theirs.isEmpty else { return nil }
    return Stats.ratios(ours, Stats.elementwiseMin(theirs))
  }

  private func target(
    _ scenario: String, _ description: String, _ comparison: TargetResult.Comparison,
    _ limit: Double, _ unit: String, _ samples: [Double]?, note: String? = nil
  ) -> TargetResult {
    guard coordinatorMeasured, let samples, !samples.isEmpty else {
      return TargetResult(
        scenario: scenario, description: description, measured: nil, comparison: comparison,
        limit: limit, unit: unit, status: .skip,
        note: coordinatorMeasured ? "not measured in this run" : "coordinator not measured")
    }
    let measured: Double
    let passes: Bool
    switch comparison {
    case .exactly:
      measured = samples.first { $0 != limit } ?? limit
      passes = samples.allSatisfy { $0 == limit }
    case .atMost:
      measured = Stats.median(samples)
      passes = measured <= limit
    case .atLeast:
      measured = Stats.median(samples)
      passes = measured >= limit
    }
    return TargetResult(
      scenario: scenario, description: description, measured: measured, comparison: comparison,
      limit: limit, unit: unit, status: passes ? .pass : .miss, note: note)
  }
}
