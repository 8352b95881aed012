import Foundation
import Testing

/// `authcoord simulate --fleet` (the deterministic fleet simulation): a clean run finds no
/// violation, a seed's trace is the same on every run and alone or within a batch, and each
/// planted bug from this package's history is caught within a small seed budget (the
/// simulation can fail). CI runs 10,000 seeds of a release build (`.ci/run`).
@Suite("authcoord simulate --fleet", .timeLimit(.minutes(5)))
struct SimulateFleetTests {
  private static func fleet(_ arguments: [String]) async throws -> (
    status: Int32, out: String, err: String
  ) {
    try await AuthcoordProcess.run(["simulate", "--fleet"] + arguments)
  }

  private static func hashes(_ out: String) -> [String: String] {
    var result: [String: String] = [:]
    for line in out.split(separator: "\n")
    where line.hasPrefix("seed 0x") && line.contains(" hash ") {
      let fields = line.split(separator: " ")
      result[String(fields[1])] = String(fields[3])
    }
    return result
  }

  // 300 seeds: 100 held every item below at least once until the in-memory lease's fences
  // began at the clock's microseconds, which moved every seed's trajectory, and then held no
  // logout aimed at a store read (seeds 1-150 hold 6); 150, until a caller's park moved into
  // the frame that admits it (a change of the async calls, which moves the jobs the driver
  // orders), and then held no logout aimed at a grant check (seeds 1-300 hold 2).
  @Test("300 seeds: no violation, and every fault and rule it is meant to exercise happened")
  func aCleanRunFindsNoViolation() async throws {
    let run = try await Self.fleet(["--seeds", "300"])
    #expect(run.status == 0, "\(run.out)\(run.err)")
    #expect(run.out.contains("seeds with a violation ....... 0"), "\(run.out)")
    for exercised in [
      "fault: pause past the TTL", "fault: pause at afterRequest", "fault: save failed",
      "fault: renewal failed", "fault: 503", "leases lost", "fenced save refused",
      "reuse inside the stated window", "save retries", "operation: logout",
      // What the plants need to be caught: compactions that drop sign-outs, back-offs the
      // lease records and ends at a sign-out, logouts during a back-off and during a flight.
      "fault: outage", "lease: history compactions", "lease: sign-outs dropped from the history",
      "phase: back-off recorded", "phase: acquire answered a back-off",
      "phase: sign-out during a back-off", "lease: back-offs ended by a sign-out",
      "operation: logout aimed at a flight", "fault: logout stopped before its announcement",
      // Added later, each from a stream of its own: garbled replies after a rotation, an
      // account in its other Unicode spelling, a process that crashes and restarts, store
      // and lease operations that hang, fail or are slow, lease notices that arrive late,
      // 429 answers with `Retry-After`, logouts aimed at a save retry or a write in doubt,
      // at a store read, a token request, a lease acquisition and a renewal in progress (and
      // at a save in progress, rarer: about 13 in 10,000 seeds, too few to require here); at a
      // grant check and at a removal in progress, before its announcement (and at a lease
      // release, rarer still: 5 in 2,000 seeds).
      "fault: garbled reply after the server answered", "fault: account in its decomposed spelling",
      "fault: crash and restart", "fault: hung store read", "fault: hung save",
      "fault: hung lease acquire", "fault: hung lease renewal", "fault: hung grant check",
      "fault: store read failed", "fault: lease acquire failed", "fault: grant check failed",
      "fault: slow store read", "fault: slow save", "fault: lease notice late", "fault: 429",
      "operation: logout aimed at a save retry", "operation: logout aimed at a store read",
      "operation: logout aimed at a token request",
      "operation: logout aimed at a lease acquisition",
      "operation: logout aimed at a lease renewal",
      "operation: logout aimed at a grant check", "operation: logout aimed at a removal",
    ] {
      let line = run.out.split(separator: "\n").first { $0.contains("  \(exercised) ..") }
      let count = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
      #expect(count > 0, "\(exercised) never happened: \(run.out)")
    }
  }

  @Test("a seed's trace is the same on every run, alone or within a batch")
  func aSeedsTraceIsTheSameEveryRun() async throws {
    let batch = try await Self.fleet(["--first", "40", "--seeds", "6", "--hashes"])
    let again = try await Self.fleet(["--first", "40", "--seeds", "6", "--hashes"])
    let first = Self.hashes(batch.out)
    #expect(first.count == 6, "\(batch.out)")
    #expect(first == Self.hashes(again.out))
    // Every seed alone as within the batch: a seed's leftover work once ran inside the next
    // one (0x2a, 0x2c and 0x2d differed alone).
    for seed in first.keys.sorted() {
      let alone = try await Self.fleet(["--seed", seed, "--hashes"])
      #expect(Self.hashes(alone.out)[seed] == first[seed], "\(seed): \(alone.out)")
    }
  }

  @Test(
    "a planted bug is caught",
    arguments: [
      ("no-lease", 30, "refresh token reuse"),
      ("retry-without-confirm", 100, "refresh token reuse"),
      // Seed 0x1b0 is the first to catch it since the caller's park moved (it was below 300).
      ("drop-rotation-on-lost-hold", 500, "stale store"),
      ("forget-sign-outs-on-history-reset", 100, "sign-out forgotten"),
      ("ignore-backoff-on-logout", 100, "back-off outlived a logout"),
      ("ignore-backoff-on-acquire", 100, "token request during a back-off"),
      ("key-per-spelling", 30, "unbounded state"),
    ])
  func aPlantedBugIsCaught(plant: String, seeds: Int, violation: String) async throws {
    let run = try await Self.fleet(["--plant", plant, "--seeds", "\(seeds)"])
    #expect(run.status == 1, "\(run.out)\(run.err)")
    #expect(run.out.contains("[\(violation)]"), "\(run.out)")
    #expect(run.out.contains("replay: swift run"), "\(run.out)")
  }

  @Test("bad options exit 2 with the reason")
  func badOptionsExit2() async throws {
    for arguments in [["--seeds", "0"], ["--plant", "nope"], ["--trace"], ["--bogus"]] {
      let run = try await Self.fleet(arguments)
      #expect(run.status == 2, "\(arguments): \(run.out)\(run.err)")
      #expect(run.err.contains("authcoord simulate --fleet:"), "\(arguments): \(run.err)")
    }
  }
}
