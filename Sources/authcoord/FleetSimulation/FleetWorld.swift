import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation

/// One seed of the fleet simulation: 2-4 simulated processes, each a REAL `AuthCoordinator`
/// with the REAL `OAuth2Authorizer`, sharing the REAL in-memory store and lease, against the
/// TestKit's SIMULATED token server, all on the virtual clock of ``VirtualWorld`` whose driver
/// picks every interleaving from the seed. Callers ask, force refreshes of the token they were
/// served, cancel, time out and log out; the seed pauses processes past their lease's time to
/// live, steps their wall clocks, fails saves and renewals, drops token requests and answers
/// 503s and late replies. The invariants are checked as the run goes and at its end.
final class FleetWorld: @unchecked Sendable {
  struct Report: Sendable {
    var seed: UInt64
    var shape: String
    var violations: [String]
    var violationCount: Int
    var traceHash: UInt64
    var trace: [String]
    var coverage: [String: Int]
    /// The largest of each kind of state seen during the storm (``checkBoundedState()``).
    var largest: [String: Int]
  }

  struct Call {
    var id: Int
    var process: Int
    var user: AccountKey
    var kind: String
    var started: Duration
    var bound: Duration
    /// For a forced refresh: the token it rejected, which it must never be served.
    var rejected: String?
    var task: Task<Void, Never>?
  }

  let seed: UInt64
  let options: FleetSimulation.Options
  let clock: VirtualClock
  let ledger: FleetLedger
  var rng: FleetRandom
  /// The spellings callers use, drawn apart from the schedule so that adding them changed no
  /// seed's interleaving.
  var spellings: FleetRandom
  /// Crashes and restarts: drawn from a stream of their own (as ``spellings``), in 30 % of the
  /// seeds, at 2 % of the operations.
  var crashes: FleetRandom
  var crashRate = 0.0
  /// Whether logouts are also aimed at a save retry or a write in doubt (30 % of the seeds),
  /// and the draws of that aim: a stream of their own.
  var aims: FleetRandom
  var aimsAtSaves = false
  /// Whether logouts are also aimed at a store read or a token request in progress (30 % of
  /// the seeds), and the draws of that aim: a stream of their own.
  var phaseAims: FleetRandom
  var aimsAtPhases = false
  /// Calls of processes that crashed: they never end, and are not waited for.
  var crashedCalls: Set<Int> = []
  /// The coordinators of crashed processes, for the summary's counts.
  var crashedCoordinators: [AuthCoordinator] = []
  var worldDate: @Sendable () -> Date = { Date() }
  let lock = NSLock()
  var calls: [Int: Call] = [:]
  var nextCall = 0
  var lastSeen: [Int: [AccountKey: String]] = [:]
  var worstInBounds = 0.0
  /// The largest of each kind of state seen during the storm (``checkBoundedState()``).
  var largest: [String: Int] = [:]
  /// The kinds of state already reported past their bound in this seed.
  var unboundedReported: Set<String> = []

  let baseDate = Date(timeIntervalSince1970: 1_800_000_000)
  var processes: [(state: FleetProcessState, coordinator: AuthCoordinator)] = []
  var users: [AccountKey] = []
  let server: SimulatedTokenServer
  let store = InMemoryTokenStore()
  var leases: [InMemoryAuthorizationLease] = []
  let outage = FleetOutage()
  var faults = FleetFaults()
  let timeToLive: Duration
  let authorizationTimeout: Duration = .seconds(20)
  let storeTimeout: Duration = .seconds(2)
  private var shape = ""

  init(seed: UInt64, options: FleetSimulation.Options, clock: VirtualClock) {
    self.seed = seed
    self.options = options
    self.clock = clock
    rng = FleetRandom.derived(seed, 1)
    spellings = FleetRandom.derived(seed, 3)
    crashes = FleetRandom.derived(seed, 5)
    aims = FleetRandom.derived(seed, 10)
    phaseAims = FleetRandom.derived(seed, 11)
    let base = baseDate
    let world = clock.world
    let date: @Sendable () -> Date = { base.addingTimeInterval(world.now.seconds) }
    worldDate = date
    ledger = FleetLedger(now: { world.now }, date: date, keepsTrace: options.trace)
    timeToLive = .seconds([2, 3, 5][Int.random(in: 0..<3, using: &rng)])
    let lifetime = Duration.seconds(Int.random(in: 20...120, using: &rng))
    server = SimulatedTokenServer(
      clock: clock, responseDelay: .milliseconds(Int.random(in: 50...400, using: &rng)),
      tokenLifetime: lifetime, date: date)
    var faults = options.faultsOff ? FleetFaults() : FleetFaults.draw(&rng)
    if !options.faultsOff {
      // Drawn from a stream of its own, so that adding it changed no seed's schedule.
      var extra = FleetRandom.derived(seed, 4)
      faults.garbledReplies = extra.chance(40) ? Double.random(in: 2...8, using: &extra) : 0
      var hangs = FleetRandom.derived(seed, 6)
      faults.hungOperations = hangs.chance(30) ? Double.random(in: 1...4, using: &hangs) : 0
      var storeFaults = FleetRandom.derived(seed, 7)
      faults.failedReads =
        storeFaults.chance(30) ? Double.random(in: 2...10, using: &storeFaults) : 0
      faults.failedLeaseCalls =
        storeFaults.chance(30) ? Double.random(in: 2...10, using: &storeFaults) : 0
      faults.slowStoreOperations =
        storeFaults.chance(30) ? Double.random(in: 2...10, using: &storeFaults) : 0
      var notices = FleetRandom.derived(seed, 8)
      if notices.chance(30) {
        faults.noticeDelayLimit = .milliseconds(Int.random(in: 200...5_000, using: &notices))
      }
      var limits = FleetRandom.derived(seed, 9)
      if limits.chance(30) { faults.tooManyRequests = Double.random(in: 30...100, using: &limits) }
      if options.plant != .noLease, crashes.chance(30) { crashRate = 2 }
      aimsAtSaves = aims.chance(30)
      aimsAtPhases = phaseAims.chance(30)
    }
    self.faults = faults
    ledger.noticeBound = faults.noticeDelayLimit
    let count = Int.random(in: 2...4, using: &rng)
    // user-2 is "usér-2": callers spell it precomposed or decomposed (``spelled(_:)``), and one
    // account must stay one key in memory, the store and the lease.
    users = (1...Int.random(in: 1...3, using: &rng)).map {
      AccountKey(account: $0 == 2 ? "us\u{E9}r-2" : "user-\($0)")
    }
    let shared = InMemoryAuthorizationLease(now: date, historyBounds: Self.historyBounds)
    leases = [shared]
    for index in 0..<count {
      let state = FleetProcessState(
        index: index, seed: seed, faults: faults, timeToLive: timeToLive)
      var lease = shared
      if options.plant == .noLease {
        lease = InMemoryAuthorizationLease(now: date, historyBounds: Self.historyBounds)
        leases.append(lease)
      }
      processes.append((state, makeCoordinator(state, lease: lease, date: date)))
    }
    shape =
      "\(count) processes, \(users.count) users, TTL \(timeToLive), tokens \(lifetime), "
      + "faults \(faults)"
    ledger.note("seed 0x\(String(seed, radix: 16)): \(shape)")
  }

  /// The lease's history bounds in the simulation: the real pruning and compaction, with a
  /// year's retention shrunk to 2 minutes and the hour kept past the compaction threshold
  /// (1,024 sign-outs and holders) shrunk to 1 minute past 2, so that a seed's few users compact
  /// the history at nearly every operation. The minute stays above the longest time a grant is
  /// used here (a flight's maximum hold, 24 s, plus a pause, at most 10 s), as the hour is in
  /// production: a grant the lease no longer holds reads as not current once a sign-out after
  /// it was dropped, and a deposed holder would then drop its rotated token as signed out
  /// (with 1 s, the first 1,000 seeds lost a rotation so).
  static let historyBounds: InMemoryAuthorizationLease.HistoryBounds = {
    var bounds = InMemoryAuthorizationLease.HistoryBounds()
    bounds.retention = 120
    bounds.minimumRetention = 60
    bounds.compactionThreshold = 2
    bounds.pruningInterval = 1
    return bounds
  }()

  func makeCoordinator(
    _ state: FleetProcessState, lease: InMemoryAuthorizationLease,
    date: @escaping @Sendable () -> Date
  ) -> AuthCoordinator {
    let processDate: @Sendable () -> Date = { date().addingTimeInterval(state.wallClockOffset) }
    let transport = FleetTransport(
      server: server, sharesTheLease: options.plant != .noLease, outage: outage,
      process: state, clock: clock, ledger: ledger)
    let authorizer = FleetAuthorizer(
      inner: OAuth2Authorizer(
        tokenEndpoint: URL(string: "https://auth.simulated.example/token")!, clientID: "fleet",
        timeout: .seconds(5), transport: transport, now: processDate),
      process: state.index)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: authorizationTimeout)
    configuration.clock = clock
    configuration.now = processDate
    configuration.leaseTimeToLive = timeToLive
    configuration.storeTimeout = storeTimeout
    configuration.saveRetryDelay = .milliseconds(500)
    configuration.maxSaveRetryDelay = .seconds(4)
    let jitter = FleetJitter(FleetRandom.derived(seed, 200 + UInt64(state.index)))
    configuration.random = { jitter.next() }
    return AuthCoordinator(
      store: FleetStore(inner: store, process: state, clock: clock, ledger: ledger),
      lease: FleetLease(inner: lease, process: state, clock: clock, ledger: ledger),
      authorizer: authorizer, configuration: configuration)
  }

  // MARK: - The run

  func run() async -> Report {
    let operations = options.operations
    let span = options.minutes * 60
    for _ in 0..<operations {
      let gap = Duration.milliseconds(
        Int.random(in: 10...(2 * span * 1000 / operations), using: &rng))
      try? await clock.sleep(for: gap)
      checkBoundedState()
      perform()
    }
    await drain()
    await finalChecks()
    for call in lock.withLock({ Array(calls.values) }) { call.task?.cancel() }
    // What the cancellations wake runs now, and after the sleepers are ended what that wakes:
    // a job of this seed left queued would run inside the next seed and move its draws.
    await clock.world.settled()
    let pending = await clock.world.quiesce()
    if pending > 0 { ledger.count("sleepers left after the run", pending) }
    await clock.world.settled()
    var coverage = ledger.coverage
    for lease in leases {
      let history = lease.historyStatistics
      for (name, value) in [
        ("lease: history passes", history.passes),
        ("lease: history compactions", history.compactions),
        ("lease: sign-outs dropped from the history", history.signOutsDropped),
        ("lease: holders dropped from the history", history.holdersDropped),
        ("lease: back-offs ended by a sign-out", history.backOffsEndedBySignOut),
      ] {
        coverage[name, default: 0] += value
      }
    }
    for coordinator in processes.map(\.coordinator) + crashedCoordinators {
      let stats = coordinator.statistics
      for (name, value) in [
        ("flights", stats.flightsStarted), ("authorizations", stats.authorizationsStarted),
        ("adopted from the store", stats.adoptedFromStore), ("leases lost", stats.leasesLost),
        ("unsaved models", stats.unsavedModels), ("save retries", stats.saveRetries),
        ("retries scheduled", stats.retriesScheduled),
        ("late results saved", stats.lateResultsSaved),
        ("flights timed out", stats.flightsTimedOut), ("holds ended", stats.holdsEnded),
      ] {
        coverage[name, default: 0] += value
      }
    }
    return Report(
      seed: seed, shape: shape, violations: ledger.violations,
      violationCount: ledger.violationCount, traceHash: ledger.traceHash, trace: ledger.trace,
      coverage: coverage, largest: lock.withLock { largest })
  }

  /// Calms the world down (no more injected faults), then waits, on the virtual clock, until
  /// every call ended (or their longest bound passed) and the flights' own work (retried saves,
  /// late results) had time to land.
  private func drain() async {
    for process in processes { process.state.calmDown() }
    let giveUp = clock.world.now + (authorizationTimeout + storeTimeout * 3) * 4
    while lock.withLock({ !calls.isEmpty }), clock.world.now < giveUp {
      try? await clock.sleep(for: .seconds(1))
    }
    // Then the flights' own work settles: save retries wait at most 4 s apart here.
    try? await clock.sleep(for: .seconds(60))
    for call in lock.withLock({ Array(calls.values) }) {
      ledger.violation(
        "hang",
        "call #\(call.id) (p\(call.process) \(call.user.account) \(call.kind)) never "
          + "ended (started at \(call.started))")
    }
  }
}
