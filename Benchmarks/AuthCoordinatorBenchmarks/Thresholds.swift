import Foundation

/// The committed thresholds CI holds the benchmark to (`Benchmarks/thresholds.json`,
/// `--check`): each names a target row of this run ("Targets checked by the program") and a
/// limit looser than the target, set where this 2-core machine's run-to-run noise cannot reach
/// it, so that a failure means the code got slower, not that the machine was busy. Every limit
/// is a ratio to a baseline or reference measured in the same run, so that it means the same on
/// a machine with more cores or a slower runtime. Exact authorization counts need no entry: a
/// wrong count is a violation, which fails every run.
struct Thresholds: Decodable {
  struct Entry: Decodable {
    /// The target's scenario and description, as the report prints them.
    var scenario: String
    var target: String
    var comparison: TargetResult.Comparison
    var limit: Double
    /// What the threshold defends, for the reader of a failure.
    var defends: String
  }

  var entries: [Entry]

  static func load(_ path: String) throws -> Thresholds {
    try JSONDecoder().decode(Thresholds.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
  }

  /// One line per entry, and whether every entry held. An entry whose target was not measured
  /// fails: a check that silently checks nothing defends nothing.
  func check(_ targets: [TargetResult]) -> (lines: [String], passed: Bool) {
    var lines: [String] = []
    var passed = true
    for entry in entries {
      let row = targets.first { $0.scenario == entry.scenario && $0.description == entry.target }
      guard let row, let measured = row.measured else {
        passed = false
        lines.append("  [FAIL] \(entry.scenario) \(entry.target): not measured in this run")
        continue
      }
      let holds: Bool
      switch entry.comparison {
      case .atMost: holds = measured <= entry.limit
      case .atLeast: holds = measured >= entry.limit
      case .exactly: holds = measured == entry.limit
      }
      if !holds { passed = false }
      let value = String(format: "%.2f", measured) + row.unit
      let limit = String(format: "%.2f", entry.limit) + row.unit
      lines.append(
        "  [\(holds ? "PASS" : "FAIL")] \(entry.scenario) \(entry.target): \(value) "
          + "(threshold \(entry.comparison.rawValue) \(limit); defends \(entry.defends))")
    }
    return (lines, passed)
  }
}
