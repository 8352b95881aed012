import Foundation

/// Everything a run produced: what `Report` prints, `JSONReport` writes, `SVGChart` draws.
struct RunSummary: Codable, Sendable {
  var schema = 1
  var date: String
  var command: String
  var quick: Bool
  var repetitions: Int
  var machine: Machine
  var coordinatorMeasured: Bool
  var coordinatorNote: String
  var heapCountersVerified: Bool
  var measurements: [Measurement]
  /// p50 and p99 over repetitions of the series that report them (B8's spread).
  var percentiles: [Percentile]
  var targets: [TargetResult]
  var violations: [String]
}

/// p50 and p99 over the repetitions of one series.
struct Percentile: Codable, Sendable {
  var scenario: String
  var implementation: String
  var parameter: String
  var metric: Metric
  var repetitions: Int
  var p50: Double
  var p99: Double

  /// The metrics reported with percentiles.
  static let metrics: [Metric] = [.spreadMs]

  static func rows(_ measurements: [Measurement]) -> [Percentile] {
    measurements.filter { metrics.contains($0.metric) }.map { series in
      Percentile(
        scenario: series.scenario, implementation: series.implementation,
        parameter: series.parameter, metric: series.metric, repetitions: series.samples.count,
        p50: finite(Stats.percentile(series.samples, 50)),
        p99: finite(Stats.percentile(series.samples, 99)))
    }
  }

  /// JSON has no NaN: a missing figure is written as -1.
  private static func finite(_ value: Double) -> Double { value.isFinite ? value : -1 }
}

/// The text report: one table per scenario and metric (medians; in brackets the median of the
/// per-repetition ratio to the reference column: the coordinator, or for B6 the plain write),
/// then the targets with PASS / MISS / SKIP.
enum Report {
  static func render(_ run: RunSummary) -> String {
    var out = "AuthCoordinator benchmark, \(run.date)\n"
    out += "machine: \(run.machine.cpu), \(run.machine.activeProcessorCount) cores "
    out += "(ProcessInfo.activeProcessorCount; \(run.machine.logicalCores) logical), "
    out += "\(run.machine.memoryGiB) GiB, Swift \(run.machine.swift)\n"
    out += "command: \(run.command)\n"
    out += "medians of \(run.repetitions) repetitions\(run.quick ? " (--quick)" : "")\n"
    out += "coordinator: \(run.coordinatorNote)\n"
    if !run.heapCountersVerified { out += "heap figures: unavailable or unverified\n" }
    for scenario in ScenarioID.allCases {
      let rows = run.measurements.filter { $0.scenario == scenario.rawValue }
      guard !rows.isEmpty else { continue }
      out += "\n\(scenario.title)\n"
      var metrics: [Metric] = []
      for row in rows where !metrics.contains(row.metric) { metrics.append(row.metric) }
      for metric in metrics {
        out += table(rows.filter { $0.metric == metric }, metric: metric, scenario: scenario)
      }
      for row in run.percentiles where row.scenario == scenario.rawValue {
        out += "  \(row.metric.rawValue), \(row.implementation) \(row.parameter): "
        out += "p50 \(format(row.p50)), p99 \(format(row.p99)) "
        out += "(\(row.repetitions) repetitions)\n"
      }
    }
    out += "\nTargets (docs/benchmarks.md; ratios per repetition, median)\n"
    for target in run.targets {
      var line = "  [\(target.status.rawValue)] \(target.scenario) \(target.description): "
      line += target.measured.map { format($0) + target.unit } ?? "-"
      line += "  (target \(target.comparison.rawValue) \(format(target.limit))\(target.unit))"
      if let note = target.note { line += "  [\(note)]" }
      out += line + "\n"
    }
    if run.violations.isEmpty {
      out += "\nAuthorization counts and results: all as expected.\n"
    } else {
      out += "\nVIOLATIONS (\(run.violations.count)):\n"
      for violation in run.violations { out += "  - \(violation)\n" }
    }
    return out
  }

  private static func table(_ rows: [Measurement], metric: Metric, scenario: ScenarioID)
    -> String
  {
    var parameters: [String] = []
    var implementations: [String] = []
    for row in rows {
      if !parameters.contains(row.parameter) { parameters.append(row.parameter) }
      if !implementations.contains(row.implementation) {
        implementations.append(row.implementation)
      }
    }
    let candidate: String? =
      scenario == .b6
      ? FileStoreKind.plainWrite.rawValue
      : (scenario == .b7 || metric == .authorizations ? nil : Impl.coordinator.rawValue)
    let reference = candidate.flatMap { name in
      implementations.contains(name) ? name : nil
    }
    func cell(_ implementation: String, _ parameter: String) -> String {
      guard
        let row = rows.first(where: {
          $0.implementation == implementation && $0.parameter == parameter
        })
      else { return "-" }
      var text = format(row.median)
      if let reference, implementation != reference,
        let base = rows.first(where: {
          $0.implementation == reference && $0.parameter == parameter
        })
      {
        text += " (\(format(Stats.median(Stats.ratios(row.samples, base.samples))))x)"
      }
      return text
    }
    let header = [metric.rawValue] + parameters
    let body = implementations.map { implementation in
      [implementation] + parameters.map { cell(implementation, $0) }
    }
    let widths = header.indices.map { column in
      ([header] + body).map { $0[column].count }.max() ?? 0
    }
    func line(_ cells: [String]) -> String {
      "  "
        + cells.enumerated().map { column, text in
          column == 0
            ? text.padding(toLength: widths[0], withPad: " ", startingAt: 0)
            : String(repeating: " ", count: widths[column] - text.count) + text
        }.joined(separator: "  ") + "\n"
    }
    var out = line(header)
    for cells in body { out += line(cells) }
    if let reference { out += "  (in brackets: ratio to \(reference), same repetition)\n" }
    return out
  }

  /// A compact number: 3 significant figures below 100, integers above.
  static func format(_ value: Double) -> String {
    guard value.isFinite else { return "n/a" }
    if value == 0 { return "0" }
    let magnitude = abs(value)
    if magnitude >= 100 || value == value.rounded() && magnitude >= 1 {
      return String(format: "%.0f", value)
    }
    if magnitude >= 10 { return String(format: "%.1f", value) }
    return String(format: "%.2f", value)
  }
}
