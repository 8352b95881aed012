import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

/// What a stress run does, from the environment.
///
/// - `STRESS_SEED`: the seed (decimal or `0x` hex); a fresh random one otherwise.
/// - `STRESS_OPS`: how many operations; `STRESS_SOAK=1` makes the default 1,000,000.
/// - `STRESS_KEYS`: how many account keys (default 100).
/// - `STRESS_FAILING_SAVES`: the percentage of saves that fail (default 2; 0 for none).
/// - `STRESS_LEASE=1`: the coordinator takes an ``InMemoryAuthorizationLease`` on the run's clock
///   for every authorization, so the clock's jumps pause holders past the lease's time to live.
/// - `STRESS_LEASE_FAULTS=p` (with `STRESS_LEASE=1`): the lease is a ``ChaosLease``: p percent
///   of its calls of every kind throw (an acquire, renewal or release half of the time after
///   the lease made it, its answer lost), and p percent wait 1-20 s on the run's clock first.
/// - `STRESS_SLOW_STORE=p`: p percent of store operations wait 1-15 s on the run's clock first;
///   the store deadline is then 10 s, so some of them run past it.
/// - `STRESS_REFRESH=1`: every model carries a refresh token, which the ``ChaosAuthorizer``
///   spends when a flight replaces the model, and checks is never sent again once rotated
///   (rule 16).
/// - `STRESS_WALL_STEPS=1`: the wall clock (models' dates, the authorizer's expiries, the
///   lease's records) is stepped now and then by 1 minute to 2 hours, forwards or backwards;
///   deadlines stay on the monotonic clock.
/// - `STRESS_SILENT=1`: the authorizer is silent and brings a refresh policy (refresh ahead,
///   retries after a back-off, remembered failures, stale-if-error); half its failures are
///   transient.
/// - `STRESS_EVENTS=1`: the first violations of calls are printed with their account's timeline
///   (``StressTimeline``) and the coordinator's events around them (``EventTrail``).
/// - `STRESS_ABANDON=finish`: a flight whose last caller left finishes and caches its model
///   (``AuthCoordinator/Configuration/AbandonPolicy/finishAndCache``) instead of being cancelled.
struct StressParameters: Sendable, CustomStringConvertible {
  var seed: UInt64
  var operations: Int
  var keys: Int
  var failingSaves: Double
  var lease = false
  var leaseFaults = 0.0
  var finishAbandoned = false
  var slowStore = 0.0
  var refreshTokens = false
  var wallSteps = false
  var silent = false
  var events = false
  /// Calls and logouts outstanding at most before the driver waits for some to end.
  var window = 512
  /// The clock moves every this many operations.
  var advanceEvery = 50

  static func fromEnvironment() -> StressParameters {
    let environment = ProcessInfo.processInfo.environment
    let soak = environment["STRESS_SOAK"] == "1"
    return StressParameters(
      seed: environment["STRESS_SEED"].flatMap(parseSeed) ?? UInt64.random(in: 1...UInt64.max),
      operations: environmentInt("STRESS_OPS", soak ? 1_000_000 : 100_000),
      keys: environmentInt("STRESS_KEYS", 100),
      failingSaves: Double(environmentInt("STRESS_FAILING_SAVES", 2)),
      lease: environment["STRESS_LEASE"] == "1",
      leaseFaults: Double(environmentInt("STRESS_LEASE_FAULTS", 0)),
      finishAbandoned: environment["STRESS_ABANDON"] == "finish",
      slowStore: Double(environmentInt("STRESS_SLOW_STORE", 0)),
      refreshTokens: environment["STRESS_REFRESH"] == "1",
      wallSteps: environment["STRESS_WALL_STEPS"] == "1",
      silent: environment["STRESS_SILENT"] == "1", events: environment["STRESS_EVENTS"] == "1")
  }

  static func parseSeed(_ text: String) -> UInt64? {
    let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
    if trimmed.hasPrefix("0x") { return UInt64(trimmed.dropFirst(2), radix: 16) }
    return UInt64(trimmed)
  }

  var seedText: String { "0x" + String(seed, radix: 16) }

  var description: String {
    "seed=\(seedText) operations=\(operations) keys=\(keys) failing saves \(failingSaves)%"
      + (lease ? " lease" : "")
      + (lease && leaseFaults > 0 ? " lease faults \(leaseFaults)%" : "")
      + (finishAbandoned ? " abandoned flights finish" : "")
      + (slowStore > 0 ? " slow store \(slowStore)%" : "")
      + (refreshTokens ? " refresh tokens" : "") + (wallSteps ? " wall clock steps" : "")
      + (silent ? " silent authorizer" : "")
      + " (rerun: STRESS_SEED=\(seedText))"
  }
}

/// What a stress run did and found.
struct StressReport: Sendable {
  var parameters: StressParameters
  var calls = 0
  var kinds: [String: Int] = [:]
  var logouts = 0
  var logoutAlls = 0
  var clockAdvanced = Duration.zero
  var faults: [ChaosFault: Int] = [:]
  var abandonedResults = 0
  var maxKeysInFlight = 0
  var outcomes: [String: Int] = [:]
  var statistics = AuthCoordinator.Statistics()
  var statisticsSamples = 0
  var transientImbalances = 0
  var firstImbalance: AuthCoordinator.Statistics?
  var pacingAdvances = 0
  var storeCounts = (reads: 0, saves: 0, removals: 0, removeAlls: 0)
  var failedSaves = 0
  var refusedFencedSaves = 0
  var leaseFailures: [String: Int] = [:]
  var slowLeaseCalls = 0
  var slowStoreOperations = 0
  var refreshSpends = 0
  var wallSteps = 0
  var drainRounds = 0
  var servedBeforeSaved = 0
  var seconds = 0.0
  var violationCount = 0
  var violations: [String] = []

  private var imbalanceText: String {
    guard let s = firstImbalance else { return "" }
    let ended = s.flightsSucceeded + s.flightsFailed + s.flightsCancelled + s.flightsTimedOut
    return
      " (first: started \(s.flightsStarted), ended \(ended), inProgress \(s.flightsInProgress))"
  }

  var summary: String {
    func list<K: Comparable>(_ counts: [K: Int]) -> String {
      counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
    let s = statistics
    return """
      RandomizedStress: \(parameters)
        operations \(parameters.operations), calls \(calls), keys \(parameters.keys), \
      \(String(format: "%.2f", seconds)) s, clock advanced \(clockAdvanced) (\(pacingAdvances) \
      steps taken to make room; wall clock stepped \(wallSteps) times)
        operations by kind: \(list(kinds))
        faults injected by kind: \(list(faults)) (results returned after cancellation: \
      \(abandonedResults)); refresh tokens spent \(refreshSpends)
        outcomes: \(list(outcomes))
        flights: started \(s.flightsStarted) succeeded \(s.flightsSucceeded) failed \
      \(s.flightsFailed) cancelled \(s.flightsCancelled) timedOut \(s.flightsTimedOut) \
      inProgress \(s.flightsInProgress); authorizations \(s.authorizationsStarted), \
      coalesced \(s.coalescedCallers), cache hits \(s.cacheHits), left early \
      \(s.callersLeftEarly), loops stopped \(s.refreshLoopsStopped), late results discarded \
      \(s.lateResultsDiscarded), evictions \(s.evictions), waiting \(s.waitingCallers)
        late results saved \(s.lateResultsSaved), holds ended \(s.holdsEnded), leases lost \
      \(s.leasesLost), refreshes ahead \(s.refreshesAhead), retries \(s.retriesScheduled), \
      stale served \(s.staleServed), cooldowns \(s.cooldownsEntered), failed fast \
      \(s.failedFast)
        store: reads \(storeCounts.reads) saves \(storeCounts.saves) removals \
      \(storeCounts.removals) removeAlls \(storeCounts.removeAlls); saves failed \(failedSaves), \
      fenced saves refused \(refusedFencedSaves), lease faults \(list(leaseFailures)) \
      (slow lease calls \(slowLeaseCalls)), slow operations \(slowStoreOperations) \
      (unsaved models \(s.unsavedModels), retries \(s.saveRetries)); most keys authorizing at \
      once \(maxKeysInFlight); drain rounds \(drainRounds); served before their save finished \
      (store deadline) \(servedBeforeSaved)
        statistics sampled mid-run \(statisticsSamples) times, unbalanced \
      \(transientImbalances) times\(imbalanceText)
        invariant violations: \(violationCount)
      """
  }
}

/// Drives one seeded randomized run against a coordinator with a ``ChaosAuthorizer``, a
/// ``RecordingStore`` and a ``ManualClock``.
///
/// The seed fixes the script: the sequence of operations and their parameters, what each
/// authorization of each key does, and the clock steps. The interleaving of the tasks is up to
/// the scheduler and is not reproducible, so a seed that once failed may need a few runs to
/// fail again.
final class StressDriver {
  let parameters: StressParameters
  let clock = ManualClock()
  let wall: SteppingWallClock
  let authorizer: ChaosAuthorizer
  let store: RecordingStore
  let chaosLease: ChaosLease?
  let trail: EventTrail?
  let coordinator: AuthCoordinator
  let ledger: StressLedger
  let keys: [AccountKey]
  static let authorizationTimeout = Duration.seconds(30)
  static let exchangeTimeout = Duration.seconds(10)
  static let slowStoreTimeout = Duration.seconds(10)
  static let refreshMaximumHold = Duration.seconds(500)
  static let slowStoreLongest = Duration.seconds(15)

  private var rng: SplitMix64
  /// Clock steps taken when the driver must wait; a separate stream so that the main script
  /// does not depend on how often that happens.
  private var pacing: SplitMix64
  private var ring: [(id: Int, task: Task<Void, Never>)?]
  private var ringNext = 0
  private var report: StressReport

  init(_ parameters: StressParameters) {
    self.parameters = parameters
    rng = SplitMix64(seed: parameters.seed)
    wall = SteppingWallClock(following: clock)
    pacing = SplitMix64(seed: SplitMix64.hash(parameters.seed, 1))
    store = RecordingStore(
      failingSaves: parameters.failingSaves, seed: SplitMix64.hash(parameters.seed, 4),
      slowness: parameters.slowStore > 0
        ? .init(percent: parameters.slowStore, clock: clock, longest: Self.slowStoreLongest)
        : nil)
    authorizer = ChaosAuthorizer(
      seed: parameters.seed, clock: clock, authorizationTimeout: Self.authorizationTimeout,
      exchangeTimeout: Self.exchangeTimeout, refreshTokens: parameters.refreshTokens,
      silent: parameters.silent, now: wall.source)
    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: Self.authorizationTimeout, exchangeTimeout: Self.exchangeTimeout)
    configuration.clock = clock
    configuration.now = wall.source
    // The store answers at once here; store deadlines fire only when the driver jumps the clock
    // past a store operation still queued. As long as the authorization's, so that they do not
    // crowd out the authorization paths the run is for (they still fire thousands of times).
    configuration.storeTimeout = Self.authorizationTimeout
    // A slow store: its deadline shorter than its longest wait, so loads fail, saves serve
    // before they land and logouts return with their removal still going on.
    if parameters.slowStore > 0 { configuration.storeTimeout = Self.slowStoreTimeout }
    // Fewer idle keys than keys: eviction and cold reloads from the store happen all the time.
    configuration.maxIdleKeys = max(parameters.keys * 2 / 5, 1)
    if parameters.refreshTokens {
      // A stopped refresh is abandoned this long after its authorizer was called. Its result,
      // if it arrives after that, is discarded, and the token it spent may be sent again
      // (documented as not guaranteed). Far beyond the latest a chaos call answers (90 s), by
      // more than the clock's largest step (200 s), no step reaches both at once, so a result
      // either lands before the hold ends or comes from a call already cancelled, which the
      // authorizer's check does not count.
      configuration.maximumHold = Self.refreshMaximumHold
    }
    if parameters.finishAbandoned { configuration.whenAbandoned = .finishAndCache }
    var lease: (any AuthorizationLease)?
    var chaos: ChaosLease?
    if parameters.lease {
      let inner = InMemoryAuthorizationLease(now: wall.source)
      lease = inner
      if parameters.leaseFaults > 0 {
        chaos = ChaosLease(
          inner, percent: parameters.leaseFaults, clock: clock,
          seed: SplitMix64.hash(parameters.seed, 5))
        lease = chaos
      }
    }
    chaosLease = chaos
    coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer, configuration: configuration)
    authorizer.storeHistory = { [store] in store.recentHistory(of: $0) }
    trail = parameters.events ? EventTrail() : nil
    ledger = StressLedger(
      expectedCalls: parameters.operations * 11 / 10, lease: parameters.lease,
      silent: parameters.silent, trail: trail)
    keys = (0..<parameters.keys).map { AccountKey(account: "k\($0)") }
    ring = Array(repeating: nil, count: parameters.window)
    report = StressReport(parameters: parameters)
  }

  func run() async -> StressReport {
    let began = ContinuousClock.now
    let following = trail?.follow(coordinator)
    if parameters.events { StressTimeline.shared.enable() }
    defer { if parameters.events { StressTimeline.shared.disable() } }
    for step in 0..<parameters.operations {
      if step > 0, step.isMultiple(of: parameters.advanceEvery) {
        // Mostly small steps (expiry, per-caller timeouts), sometimes past every deadline.
        let seconds =
          rng.chance(3)
          ? Int.random(in: 30...200, using: &rng)
          : Int.random(in: 0...8, using: &rng)
        advance(.seconds(seconds))
        if parameters.wallSteps, rng.chance(2) { stepWallClock() }
      }
      if step.isMultiple(of: 97) { sampleStatistics() }
      await waitForRoom()
      performOperation()
    }
    await drain()
    await finalChecks()
    report.seconds = secondsSince(began)
    report.calls = ledger.started
    report.outcomes = ledger.outcomes
    report.faults = authorizer.faults
    report.abandonedResults = authorizer.abandonedCount
    report.maxKeysInFlight = authorizer.maxInFlightKeys
    report.storeCounts = store.counts
    report.failedSaves = store.failedSaves
    report.refusedFencedSaves = store.refusedFencedSaves
    report.leaseFailures = chaosLease?.failures ?? [:]
    report.slowLeaseCalls = chaosLease?.slowCalls ?? 0
    report.slowStoreOperations = store.slowOperations
    report.refreshSpends = authorizer.refreshSpends
    report.servedBeforeSaved = ledger.servedBeforeSaved
    report.statistics = coordinator.statistics
    (report.violationCount, report.violations) = ledger.violations
    following?.cancel()
    report.violations += ledger.diagnoses()
    return report
  }

  // MARK: - Operations

  private func performOperation() {
    let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
    let roll = Double.random(in: 0..<100, using: &rng)
    switch roll {
    case ..<40:
      count("request")
      startCall(key, .ifNeeded)
    case ..<52:
      count("forced refresh, named token")
      startCall(key, .force(rejecting: namedRejection(key)))
    case ..<60:
      count("forced refresh, nil token")
      startCall(key, .force(rejecting: nil))
    case ..<72:
      count("cancel an outstanding call")
      cancelOutstanding()
    case ..<78:
      count("request cancelled at once")
      let refresh: RefreshPolicy = rng.chance(50) ? .ifNeeded : .force(rejecting: nil)
      let started = startCall(key, refresh)
      ledger.markCancelled(started.id)
      started.task.cancel()
    case ..<81:
      count("logout")
      logout(.logout(account: key.account))
    case ..<81.15:
      count("logoutAll")
      logout(.logoutAll)
    default:
      count("burst of 3-12 callers on one key")
      let refresh: RefreshPolicy =
        rng.chance(30) ? .force(rejecting: namedRejection(key)) : .ifNeeded
      for _ in 0..<Int.random(in: 3...12, using: &rng) { startCall(key, refresh) }
    }
  }

  private func count(_ kind: String) { report.kinds[kind, default: 0] += 1 }

  /// The token last served for `key`, or one that was never valid.
  private func namedRejection(_ key: AccountKey) -> String {
    ledger.lastToken(key.account) ?? "tok|\(key.account)|0"
  }

  @discardableResult
  private func startCall(_ key: AccountKey, _ refresh: RefreshPolicy) -> (
    id: Int, task: Task<Void, Never>
  ) {
    let timeout: Duration? =
      rng.chance(25) ? .seconds(Int.random(in: 1...45, using: &rng)) : nil
    let call = ledger.begin(key: key, refresh: refresh, timeout: timeout, store: store)
    let (coordinator, ledger, store, authorizer) = (coordinator, ledger, store, authorizer)
    let task = Task {
      let result: Result<AuthModel, any Error>
      do {
        result = .success(
          try await coordinator.authModel(
            for: call.key, refresh: call.refresh, timeout: call.timeout))
      } catch {
        result = .failure(error)
      }
      ledger.finish(call, result, store: store, authorizer: authorizer)
    }
    ring[ringNext] = (call.id, task)
    ringNext = (ringNext + 1) % ring.count
    return (call.id, task)
  }

  private func cancelOutstanding() {
    guard let (id, task) = ring[Int.random(in: 0..<ring.count, using: &rng)] else { return }
    ledger.markCancelled(id)
    task.cancel()
  }

  private func logout(_ change: AccountStatusChange) {
    if change == .logoutAll { report.logoutAlls += 1 } else { report.logouts += 1 }
    ledger.logoutBegan()
    StressTimeline.shared.note(change.account ?? "*", "\(change) begins")
    authorizer.noteLogout(of: change.account)
    let issuedBefore = authorizer.issuedSeq
    let (coordinator, ledger, authorizer) = (coordinator, ledger, authorizer)
    Task {
      await coordinator.accountStatusChanged(change)
      StressTimeline.shared.note(change.account ?? "*", "\(change) returned")
      authorizer.noteLogoutReturned(of: change.account)
      ledger.logoutReturned(change.account, issuedBefore: issuedBefore)
    }
  }

  /// Steps the wall clock by 1 minute to 2 hours, forwards or backwards; back towards the
  /// monotonic clock's date when it is already more than a day off, so it stays within reach.
  private func stepWallClock() {
    var seconds = TimeInterval(Int.random(in: 60...7_200, using: &rng))
    if rng.chance(50) { seconds = -seconds }
    if abs(wall.totalStep) > 86_400 { seconds = wall.totalStep > 0 ? -abs(seconds) : abs(seconds) }
    wall.step(by: seconds)
    report.wallSteps += 1
  }

  private func advance(_ duration: Duration) {
    report.clockAdvanced += duration
    clock.advance(by: duration)
  }

  // MARK: - Pacing and checks

  /// Keeps at most `window` calls and logouts outstanding. Yields first; when everything
  /// outstanding waits for time to pass, moves the clock.
  private func waitForRoom() async {
    while ledger.outstanding >= parameters.window {
      for _ in 0..<256 where ledger.outstanding >= parameters.window { await Task.yield() }
      if ledger.outstanding >= parameters.window {
        report.pacingAdvances += 1
        advance(.seconds(Int.random(in: 1...5, using: &pacing)))
      }
    }
  }

  private func sampleStatistics() {
    let stats = coordinator.statistics
    report.statisticsSamples += 1
    if !flightsBalance(stats) {
      // Every snapshot balances: flight counters change together in one update.
      report.transientImbalances += 1
      if report.firstImbalance == nil { report.firstImbalance = stats }
      ledger.violation("flights do not balance mid-run: \(stats)")
    }
    if stats.flightsInProgress < 0 || stats.waitingCallers < 0 {
      ledger.violation("negative counters mid-run: \(stats)")
    }
  }

  /// Ends the run: moves the clock past every deadline, over and over, until every call and
  /// logout has ended, every authorizer call returned, and no flight or waiter is left. A run
  /// that does not get there within the bound has a hang, which is a violation.
  private func drain() async {
    func settled() -> Bool {
      let stats = coordinator.statistics
      return ledger.outstanding == 0 && authorizer.runningCalls == 0
        && stats.flightsInProgress == 0 && stats.waitingCallers == 0
    }
    let maxRounds = 1_000
    var round = 0
    while !settled(), round < maxRounds {
      for _ in 0..<512 where !settled() { await Task.yield() }
      if settled() { break }
      advance(.seconds(20))
      round += 1
    }
    report.drainRounds = round
    guard !settled() else { return }
    let stuck = ledger.unfinished(limit: 10).map {
      "#\($0.id) \($0.key.account) \($0.refresh) timeout \(String(describing: $0.timeout))"
    }
    ledger.violation(
      "hang: after \(maxRounds) rounds of yielding and moving the clock 20 s, "
        + "\(ledger.outstanding) calls/logouts outstanding, \(authorizer.runningCalls) "
        + "authorizer calls running, statistics \(coordinator.statistics); first stuck: \(stuck)")
  }

  private func finalChecks() async {
    // A save that ran past the store deadline served its model before it finished; the store
    // answers at once here, so after a few turns of the scheduler every such save has run. A
    // failed save is retried with back-off on the manual clock, which moves a second at a time
    // here (the longest retry delay is 30 s).
    for round in 0..<100_000 {
      guard ledger.unsavedCount(store) > 0 else { break }
      if round % 100 == 99 { clock.advance(by: .seconds(1)) }
      await Task.yield()
    }
    let unsaved = ledger.unsavedCount(store)
    for problem in ledger.servedButNeverSaved(store) { ledger.violation(problem) }
    if unsaved > 20 { ledger.violation("\(unsaved - 20) more models served but never saved") }
    let stats = coordinator.statistics
    if !flightsBalance(stats) { ledger.violation("flights do not balance at the end: \(stats)") }
    if stats.flightsInProgress != 0 { ledger.violation("flights left in progress: \(stats)") }
    if stats.waitingCallers != 0 { ledger.violation("callers left waiting: \(stats)") }
    let overlaps = authorizer.overlaps
    if overlaps.count > 0 {
      ledger.violation(
        "\(overlaps.count) authorizations started while another of the same key was in "
          + "flight: \(overlaps.first)")
    }
    let respent = authorizer.respent
    for seq in authorizer.respentModels.prefix(10) {
      // What became of the model whose rotation was undone.
      let saved = store.saveIndex(of: seq).map { "saved at store operation \($0)" } ?? "never saved"
      ledger.violation("model #\(seq), whose refresh token was sent again: \(saved)")
    }
    if respent.count > 0 {
      ledger.violation(
        "\(respent.count) refresh tokens sent again or refreshes cancelled: \(respent.first)")
    }
    let logouts = ledger.logouts
    if logouts.started != logouts.finished {
      ledger.violation("logouts: \(logouts.started) started, \(logouts.finished) returned")
    }
    if ledger.finished != ledger.started {
      ledger.violation("calls: \(ledger.started) started, \(ledger.finished) ended")
    }
  }
}
