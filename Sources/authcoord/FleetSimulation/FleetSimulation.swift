import AuthCoordinator
import Foundation

/// `authcoord simulate --fleet`: a deterministic simulation of a fleet of processes sharing one
/// store and one lease, under faults, over many seeds (``FleetWorld``, one per seed). The code
/// under test is the library's own (the coordinator, its state machine, the in-memory store and
/// lease, the OAuth 2 authorizer); what is simulated is the token server (the TestKit's), the
/// network's and the processes' faults, and time, which is virtual: ``VirtualWorld`` runs every
/// job on one thread in an order the seed picks, so one seed gives one trace, byte for byte,
/// on a quiet or a busy machine.
enum FleetSimulation {
  /// A known bug to plant, so that a run shows the simulation can fail.
  enum Plant: String, CaseIterable, Sendable {
    /// Every process gets its own lease: nothing keeps two processes from spending one
    /// refresh token (rule 16).
    case noLease = "no-lease"
    /// Library bugs from this package's history, put back in the library's code
    /// (``/AuthCoordinator/PlantedBug``): see there.
    case retryWithoutConfirm = "retry-without-confirm"
    case dropRotationOnLostHold = "drop-rotation-on-lost-hold"
    case forgetSignOutsOnHistoryReset = "forget-sign-outs-on-history-reset"
    case ignoreBackOffOnLogout = "ignore-backoff-on-logout"
    case ignoreBackOffOnAcquire = "ignore-backoff-on-acquire"
    case keyPerSpelling = "key-per-spelling"

    /// The library bug this plant puts back, if it is one.
    var libraryBug: PlantedBug? { PlantedBug(rawValue: rawValue) }
  }

  struct Options: Sendable {
    var seeds = 200
    var firstSeed: UInt64 = 1
    /// `--seed S`: exactly that seed (and `seeds` 1).
    var only: UInt64?
    var minutes = 3
    var operations = 80
    var trace = false
    var plant: Plant?
    /// No injected faults (pauses and clock steps still happen): `--no-faults`.
    var faultsOff = false
    /// Stop at the first seed with a violation.
    var stopAtFirst = false
    /// Print each seed's trace hash (`--hashes`).
    var hashes = false
  }

  /// A bad option, said in a sentence.
  struct Problem: Error {
    var message: String
    init(_ message: String) { self.message = message }
  }

  static let usage = """
    usage: authcoord simulate --fleet [options]

    A deterministic simulation of 2-4 processes (each a real AuthCoordinator with the real
    OAuth2Authorizer) sharing the real in-memory store and lease, against a SIMULATED token
    server that rotates refresh tokens, on a virtual clock. Each seed fixes every scheduling
    choice, every fault and every clock reading; a violation prints its seed, replayable with
    --seed S --trace.

    options:
      --seeds N        seeds to run, from --first (default 200)
      --first S        the first seed (default 1)
      --seed S         run only seed S (decimal or 0x hex)
      --minutes M      simulated minutes of operations per seed (default 3)
      --operations N   operations per seed (default 80)
      --trace          print the seed's trace (with --seed)
      --plant NAME     plant a known bug: \(Plant.allCases.map(\.rawValue).joined(separator: ", "))
      --no-faults      no failed saves, renewals or token requests (pauses and steps remain)
      --stop           stop at the first seed with a violation
      --hashes         print each seed's trace hash (a seed's hash is the same alone or in a run)
      -h, --help       show this help

    exit status: 0 no violation, 1 violations (each with its seed), 2 bad options
    """

  static func parse(_ arguments: [String]) -> Result<Options, Problem> {
    var options = Options()
    var index = 0
    func value() -> String? {
      index += 1
      return index < arguments.count ? arguments[index] : nil
    }
    func number(_ text: String?) -> UInt64? {
      guard let text else { return nil }
      if text.hasPrefix("0x") { return UInt64(text.dropFirst(2), radix: 16) }
      return UInt64(text)
    }
    while index < arguments.count {
      switch arguments[index] {
      case "--fleet": break
      case "--seeds":
        guard let n = number(value()), n > 0, n <= 100_000_000 else {
          return .failure(Problem("--seeds takes a count from 1"))
        }
        options.seeds = Int(n)
      case "--first":
        guard let n = number(value()) else { return .failure(Problem("--first takes a seed")) }
        options.firstSeed = n
      case "--seed":
        guard let n = number(value()) else { return .failure(Problem("--seed takes a seed")) }
        options.only = n
      case "--minutes":
        guard let n = number(value()), n > 0, n <= 600 else {
          return .failure(Problem("--minutes takes 1-600"))
        }
        options.minutes = Int(n)
      case "--operations":
        guard let n = number(value()), n > 0, n <= 100_000 else {
          return .failure(Problem("--operations takes 1-100000"))
        }
        options.operations = Int(n)
      case "--trace": options.trace = true
      case "--no-faults": options.faultsOff = true
      case "--stop": options.stopAtFirst = true
      case "--hashes": options.hashes = true
      case "--plant":
        guard let name = value(), let plant = Plant(rawValue: name) else {
          let names = Plant.allCases.map(\.rawValue).joined(separator: ", ")
          return .failure(Problem("--plant takes one of \(names)"))
        }
        options.plant = plant
      default:
        return .failure(Problem("unknown option '\(arguments[index])'"))
      }
      index += 1
    }
    if options.trace && options.only == nil { return .failure(Problem("--trace needs --seed")) }
    return .success(options)
  }

  /// `swift run`'s flag for this build: a seed replays exactly in the same configuration (the
  /// optimizer changes where tasks suspend, so a debug and a release build may interleave one
  /// seed differently).
  #if DEBUG
    static let configuration = ""
  #else
    static let configuration = " -c release"
  #endif

  static func run(_ arguments: [String]) async -> Int32 {
    if arguments.contains("-h") || arguments.contains("--help") {
      print(usage)
      return 0
    }
    let options: Options
    switch parse(arguments) {
    case .success(let parsed): options = parsed
    case .failure(let problem):
      FileHandle.standardError.write(
        Data("authcoord simulate --fleet: \(problem.message)\n\n\(usage)\n".utf8))
      return 2
    }
    let seeds: [UInt64] =
      options.only.map { [$0] }
      ?? (0..<UInt64(options.seeds)).map { options.firstSeed &+ $0 }
    PlantedBug.planted = options.plant?.libraryBug
    let current = FleetCounter()
    VirtualWorld.shared.onStuck = { at in
      // A deadlock in the simulated world: say which seed, and stop (no run would end).
      let seed = String(current.value, radix: 16)
      FileHandle.standardError.write(
        Data(
          ("authcoord simulate --fleet: seed 0x\(seed) is stuck at \(at) (no task can run "
            + "and no sleeper is left: a deadlock); replay: swift run\(Self.configuration) "
            + "authcoord simulate --fleet --seed 0x\(seed) --trace\n").utf8))
      exit(1)
    }
    let began = Date()
    var failing: [FleetWorld.Report] = []
    var coverage: [String: Int] = [:]
    var largest: [String: Int] = [:]
    var combined: UInt64 = 0xCBF2_9CE4_8422_2325
    var ran = 0
    for seed in seeds {
      current.set(Int(truncatingIfNeeded: seed))
      let report: FleetWorld.Report
      do {
        report = try await VirtualWorld.shared.run(speedup: 0, shuffle: seed) { clock in
          await FleetWorld(seed: seed, options: options, clock: clock).run()
        }
      } catch {
        FileHandle.standardError.write(Data("authcoord simulate --fleet: \(error)\n".utf8))
        return 2
      }
      // What the seed's world does as it is let go (streams its lease finishes as it goes, and
      // the tasks those wake) runs now, before the next seed's first job: left queued, it
      // would run inside the next seed and move its draws.
      await VirtualWorld.shared.settled()
      ran += 1
      combined = (combined ^ report.traceHash) &* 0x0100_0000_01B3
      for (name, value) in report.coverage { coverage[name, default: 0] += value }
      for (name, value) in report.largest { largest[name] = max(largest[name] ?? 0, value) }
      if options.trace { for line in report.trace { print(line) } }
      if options.hashes {
        print("seed 0x\(String(seed, radix: 16)) hash 0x\(String(report.traceHash, radix: 16))")
      }
      if report.violationCount > 0 {
        failing.append(report)
        print(
          "seed 0x\(String(seed, radix: 16)): \(report.violationCount) violation(s) (\(report.shape))"
        )
        for violation in report.violations.prefix(5) { print("  \(violation)") }
        print(
          "  replay: swift run\(Self.configuration) authcoord simulate --fleet --seed 0x\(String(seed, radix: 16)) --trace\(options.plant.map { " --plant \($0.rawValue)" } ?? "")"
        )
        if options.stopAtFirst { break }
      }
    }
    let seconds = Date().timeIntervalSince(began)
    print(
      """
      fleet simulation: \(ran) seed(s) from 0x\(String(seeds.first ?? 0, radix: 16))\
      \(options.plant.map { ", planted \($0.rawValue)" } ?? ""), \(options.operations) operations \
      over \(options.minutes) simulated minute(s) each
        seeds with a violation ....... \(failing.count)
        seconds ...................... \(String(format: "%.1f", seconds)) (\(String(format: "%.0f", Double(ran) / max(seconds, 0.001))) seeds/s)
        trace hash ................... 0x\(String(combined, radix: 16))
      coverage (totals over the seeds):
      """)
    for (name, value) in coverage.sorted(by: { $0.key < $1.key }) {
      print("  \(name) \(String(repeating: ".", count: max(2, 40 - name.count))) \(value)")
    }
    print("largest state seen during the storms (checked before every operation):")
    for (name, value) in largest.sorted(by: { $0.key < $1.key }) {
      print("  \(name) \(String(repeating: ".", count: max(2, 40 - name.count))) \(value)")
    }
    return failing.isEmpty ? 0 : 1
  }
}
