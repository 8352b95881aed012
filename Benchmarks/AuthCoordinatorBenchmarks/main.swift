import AuthCoordinator
import Foundation

// B8 runs copies of this program as its processes (CrossProcessChild.swift).
if CommandLine.arguments.count > 1, CommandLine.arguments[1] == CrossProcessChild.flag {
  exit(await CrossProcessChild.main(Array(CommandLine.arguments.dropFirst(2))))
}

let usage = """
  usage: authcoord-bench [options]

    --quick                smaller N and 3 repetitions (CI smoke, under 30 s)
    --scenario IDS         run only these scenarios, e.g. B2 or B1,B5 (B7 runs B2 and B3;
                           B8 starts K copies of this program on one store file)
    --reps N               repetitions per measurement (default 5, quick 3)
    --json PATH            write the results as JSON
    --svg PATH             write the cost-per-waiter chart as SVG
    --skip-coordinator     measure the baselines only
    --check PATH           hold the run to the thresholds in PATH (Benchmarks/thresholds.json):
                           exit 3 when one fails
    --only IMPLS           measure only these implementations, e.g. coordinator (for a
                           profiler: perf record -g authcoord-bench --scenario B5 --only
                           coordinator); targets that need the others read SKIP
    --help                 show this text

  Progress goes to stderr, the report to stdout. Exit status 1 when an authorization count or
  a result is wrong, 2 on bad arguments, 3 when a threshold of --check fails.
  """

struct Options {
  var quick = false
  var reps: Int?
  var scenarios = Set(ScenarioID.allCases)
  var jsonPath: String?
  var svgPath: String?
  var skipCoordinator = false
  var only: Set<Impl>?
  var thresholdsPath: String?
}

func fail(_ message: String, status: Int32) -> Never {
  FileHandle.standardError.write(Data("authcoord-bench: \(message)\n".utf8))
  exit(status)
}

func parse(_ arguments: [String]) -> Options {
  var options = Options()
  var remaining = arguments[...]
  func value(for flag: String) -> String {
    guard let value = remaining.popFirst() else { fail("\(flag) needs a value", status: 2) }
    return value
  }
  while let argument = remaining.popFirst() {
    switch argument {
    case "--quick": options.quick = true
    case "--reps":
      guard let reps = Int(value(for: argument)), reps > 0 else {
        fail("--reps needs a positive number", status: 2)
      }
      options.reps = reps
    case "--scenario":
      var chosen = Set<ScenarioID>()
      for name in value(for: argument).split(separator: ",") {
        guard let id = ScenarioID(rawValue: name.uppercased()) else {
          fail("unknown scenario \(name) (B1 to B8)", status: 2)
        }
        chosen.insert(id)
      }
      options.scenarios = chosen
    case "--json": options.jsonPath = value(for: argument)
    case "--check": options.thresholdsPath = value(for: argument)
    case "--svg": options.svgPath = value(for: argument)
    case "--skip-coordinator": options.skipCoordinator = true
    case "--only":
      var chosen = Set<Impl>()
      for name in value(for: argument).split(separator: ",") {
        guard let impl = Impl(rawValue: String(name)) else {
          let known = Impl.allCases.map(\.rawValue).joined(separator: ", ")
          fail("unknown implementation \(name) (\(known))", status: 2)
        }
        chosen.insert(impl)
      }
      options.only = chosen
    case "--help", "-h":
      print(usage)
      exit(0)
    default: fail("unknown argument \(argument)\n\(usage)", status: 2)
    }
  }
  return options
}

let options = parse(Array(CommandLine.arguments.dropFirst()))
// Read before the run, so that a bad file fails at once.
let thresholds: Thresholds? = options.thresholdsPath.map { path in
  do { return try Thresholds.load(path) } catch {
    fail("cannot read the thresholds in \(path): \(error)", status: 2)
  }
}

let startNanos = nowNanos()
let progress: @Sendable (String) -> Void = { message in
  let seconds = Double(nowNanos() - startNanos) / 1e9
  FileHandle.standardError.write(Data("[\(String(format: "%6.1f", seconds))s] \(message)\n".utf8))
}

let coordinatorMeasured = !options.skipCoordinator
let coordinatorNote = coordinatorMeasured ? "measured" : "skipped (--skip-coordinator)"
progress("coordinator: \(coordinatorNote)")

let heapVerified = await Heap.selfCheck()
if !heapVerified { progress("heap counters unavailable or unverified: heap figures omitted") }

let plan = Plan(quick: options.quick, reps: options.reps)
let scenarios = Scenarios(
  plan: plan,
  impls: Impl.allCases.filter {
    ($0 != .coordinator || coordinatorMeasured) && options.only?.contains($0) != false
  },
  heapVerified: heapVerified,
  progress: progress)
let selected = options.scenarios
// The harness runs off the main actor, so callers it spawns never inherit the main thread.
let results = await Task.detached { () -> Results in
  var results = Results()
  do {
    try await scenarios.run(selected, into: &results)
  } catch {
    results.violation("run aborted: \(error)")
  }
  return results
}.value

let run = RunSummary(
  date: ISO8601DateFormatter().string(from: Date()),
  command: (["authcoord-bench"] + CommandLine.arguments.dropFirst()).joined(separator: " "),
  quick: plan.quick,
  repetitions: plan.reps,
  machine: Machine.current(),
  coordinatorMeasured: coordinatorMeasured,
  coordinatorNote: coordinatorNote,
  heapCountersVerified: heapVerified,
  measurements: results.measurements,
  percentiles: Percentile.rows(results.measurements),
  targets: Targets(results: results, plan: plan, coordinatorMeasured: coordinatorMeasured)
    .evaluate(),
  violations: results.violations)

print(Report.render(run), terminator: "")
do {
  if let path = options.jsonPath {
    try JSONReport.write(run, to: path)
    progress("wrote \(path)")
  }
  if let path = options.svgPath {
    if let svg = SVGChart.render(run) {
      let url = URL(fileURLWithPath: path)
      try FileManager.default.createDirectory(
        at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
      try Data(svg.utf8).write(to: url, options: .atomic)
      progress("wrote \(path)")
    } else {
      progress("no chart: B2 did not run")
    }
  }
} catch {
  fail("cannot write the results: \(error)", status: 1)
}
var thresholdsHeld = true
if let thresholds, let path = options.thresholdsPath {
  let (lines, passed) = thresholds.check(run.targets)
  print("\nThresholds (\(path); CI fails on any FAIL)")
  for line in lines { print(line) }
  thresholdsHeld = passed
}
progress("done")
exit(!run.violations.isEmpty ? 1 : thresholdsHeld ? 0 : 3)
