import AuthCoordinator
import Foundation

/// What a shared-lease stress run does, from the environment.
///
/// - `SHARED_STRESS_SEED`: the seed (decimal or `0x` hex); a fresh random one otherwise.
/// - `SHARED_STRESS_OPS`: how many operations (default 3,000).
/// - `SHARED_STRESS_MARGIN_MS`: how long past its deadline a call may end (default 1,000 ms).
/// - `SHARED_STRESS_STORE_LATENCY_US`: the most a store operation takes (default 2,000 µs; 1
///   for none).
/// - `SHARED_STRESS_FAULTS`: which faults (``SharedStressFaults``): all by default, `0` for
///   none, or a comma-separated list of `saves`, `renewals`, `hangs`, `clock`. 5% of saves and
///   5% of lease renewals fail, 2% of authorizer calls hang past the maximum hold (and never
///   reach the server), and 1% of operations step the processes' wall clock by up to ±2 s.
/// - `SHARED_STRESS_PAUSE_OPS`: how many operations a run with pauses makes (default 2,000, one
///   every 1-9 ms).
/// - `SHARED_STRESS_PAUSES`: in a run with pauses, which kinds (``SharedStressPauses/Kind``): all
///   by default, or a comma-separated list of `acquire`, `reread`, `renewal`, `backOff`,
///   `afterRequest`.
///
/// A run with pauses (``SharedStressPauses``) gives its processes deadlines of 300-600 ms, longer
/// than the longest pause, and leases of 100-200 ms, and has 2-4 users; its token server takes up
/// to 150 ms and answers 20% of the calls with a 503 and a `Retry-After`, which the coordinators' silent-refresh
/// policy retries under the lease.
struct SharedStressParameters: Sendable, CustomStringConvertible {
  var seed: UInt64
  var operations: Int
  var margin: Duration
  var storeLatency: Duration
  var faults: Set<SharedStressFaults.Kind>
  /// Calls and logouts outstanding at most before the driver waits for some to end.
  var window = 200
  /// Whether processes pause past their lease's time to live, with retries to pause in.
  var pauses = false
  /// The kinds of pauses of a run with pauses.
  var pauseKinds = Set(SharedStressPauses.Kind.allCases)

  static func fromEnvironment(pauses: Bool = false) -> SharedStressParameters {
    let environment = ProcessInfo.processInfo.environment
    return SharedStressParameters(
      seed: environment["SHARED_STRESS_SEED"].flatMap(StressParameters.parseSeed)
        ?? UInt64.random(in: 1...UInt64.max),
      operations: pauses
        ? environmentInt("SHARED_STRESS_PAUSE_OPS", 2_000)
        : environmentInt("SHARED_STRESS_OPS", 3_000),
      margin: .milliseconds(environmentInt("SHARED_STRESS_MARGIN_MS", 1_000)),
      storeLatency: .microseconds(environmentInt("SHARED_STRESS_STORE_LATENCY_US", 2_000)),
      faults: faultKinds(environment["SHARED_STRESS_FAULTS"]), pauses: pauses,
      pauseKinds: environment["SHARED_STRESS_PAUSES"].map {
        Set($0.split(separator: ",").compactMap { .init(rawValue: String($0)) })
      } ?? Set(SharedStressPauses.Kind.allCases))
  }

  static func faultKinds(_ text: String?) -> Set<SharedStressFaults.Kind> {
    switch text {
    case nil, "1": Set(SharedStressFaults.Kind.allCases)
    case "0": []
    case let list?: Set(list.split(separator: ",").compactMap { .init(rawValue: String($0)) })
    }
  }

  var seedText: String { "0x" + String(seed, radix: 16) }

  var description: String {
    "seed=\(seedText) operations=\(operations)\(pauses ? " with pauses \(pauseKinds.map(\.rawValue).sorted().joined(separator: ","))" : "") store latency \(storeLatency) faults \(faults.isEmpty ? "none" : faults.map(\.rawValue).sorted().joined(separator: ",")) (rerun: SHARED_STRESS_SEED=\(seedText))"
  }
}

/// One simulated process: a coordinator on the shared store and lease, with its own authorizer
/// and deadlines.
struct SharedStressProcess: Sendable {
  let index: Int
  let coordinator: AuthCoordinator
  let authorizationTimeout: Duration
  let leaseTimeToLive: Duration
}

/// Drives one seeded randomized run of K simulated processes (coordinators in this test process)
/// sharing one ``InMemoryTokenStore`` and one ``InMemoryAuthorizationLease``, on the real
/// continuous clock with short deadlines, against a ``SharedLeaseIssuer`` that rotates refresh
/// tokens and revokes a family on reuse.
///
/// The seed fixes the processes, their deadlines, the users, the script of operations and what
/// the n-th authorizer call of each process does. Timing is real, so a run is not replayable;
/// a seed that once failed may need several runs to fail again.
final class SharedLeaseStressDriver {
  let parameters: SharedStressParameters
  let issuer = SharedLeaseIssuer()
  let store = InMemoryTokenStore()
  let lease = InMemoryAuthorizationLease()
  let ledger: SharedStressLedger
  /// The faults injected, and the wall clock every simulated process reads (the host's; the
  /// lease keeps its expiries on the real clock, as a lease on a clock that never steps does).
  let faults: SharedStressFaults
  /// The pauses of a run with pauses (none fire otherwise).
  let pauses: SharedStressPauses
  let processes: [SharedStressProcess]
  let users: [AccountKey]
  private var rng: SplitMix64
  private var tasks: [Int: Task<Void, Never>] = [:]
  private var listeners: [Task<Void, Never>] = []
  private var kinds: [String: Int] = [:]

  init(_ parameters: SharedStressParameters) {
    self.parameters = parameters
    var rng = SplitMix64(seed: parameters.seed)
    let ledger = SharedStressLedger(seedText: parameters.seedText)
    self.ledger = ledger
    let faults = SharedStressFaults(kinds: parameters.faults, seed: parameters.seed)
    self.faults = faults
    let count = Int.random(in: 2...6, using: &rng)
    users = (0..<Int.random(in: parameters.pauses ? 2...4 : 1...3, using: &rng)).map {
      AccountKey(account: "u\($0)")
    }
    let deadlines = (0..<count).map { _ in
      parameters.pauses
        ? (
          Duration.milliseconds(Int.random(in: 300...600, using: &rng)),
          Duration.milliseconds(Int.random(in: 100...200, using: &rng))
        )
        : (
          Duration.milliseconds(Int.random(in: 50...200, using: &rng)),
          Duration.milliseconds(Int.random(in: 100...300, using: &rng))
        )
    }
    let pauses = SharedStressPauses(
      timeToLive: deadlines.map(\.1), seed: parameters.seed,
      kinds: parameters.pauses ? parameters.pauseKinds : [])
    self.pauses = pauses
    var processes: [SharedStressProcess] = []
    for (index, (timeout, timeToLive)) in deadlines.enumerated() {
      let shared = SharedStressStore(
        inner: store, latency: parameters.storeLatency,
        seed: SplitMix64.hash(parameters.seed, 2, UInt64(index)), faults: faults, process: index,
        ledger: ledger, pauses: pauses)
      var configuration = AuthCoordinator.Configuration(
        authorizationTimeout: timeout, exchangeTimeout: timeout, refreshLeeway: .milliseconds(20))
      configuration.leaseTimeToLive = timeToLive
      configuration.maxForcedAuthorizations = 1_000_000
      // Well above the slowest authorizer call (1.5 deadlines): only hung calls outlast it.
      configuration.maximumHold = timeout * 6
      configuration.saveRetryDelay = .milliseconds(20)
      configuration.maxSaveRetryDelay = .milliseconds(200)
      configuration.now = faults.wallClock
      if parameters.pauses {
        // Retries of the 503s under the lease, with back-offs to pause in; a short memory of
        // failures, so that a user whose family was revoked is soon served again.
        configuration.silentRefresh = SilentRefreshPolicy(
          refreshAhead: nil, maxAttempts: 3, retryDelay: .milliseconds(10),
          maxRetryDelay: .milliseconds(40), maxRetryWait: .milliseconds(100),
          failureCooldown: .milliseconds(50))
      }
      let authorizer = SharedStressAuthorizer(
        process: index, seed: parameters.seed,
        latency: parameters.pauses ? .milliseconds(100) : timeout, hangFor: timeout * 8,
        issuer: issuer, ledger: ledger, faults: faults, pauses: pauses,
        timeToLive: timeToLive, unavailablePercent: parameters.pauses ? 20 : 0,
        isInteractive: !parameters.pauses)
      let coordinator = AuthCoordinator(
        store: shared,
        lease: SharedStressLease(
          inner: lease, process: index, ledger: ledger, faults: faults, pauses: pauses),
        authorizer: authorizer, configuration: configuration)
      processes.append(
        SharedStressProcess(
          index: index, coordinator: coordinator, authorizationTimeout: timeout,
          leaseTimeToLive: timeToLive))
    }
    self.processes = processes
    self.rng = rng
  }

  /// A call's bound with no timeout of its own: waiting for a stopped refresh, for the lease
  /// and for the authorizer each count against the authorization deadline; a store operation
  /// never takes longer than it. Four deadlines, then the margin.
  func bound(_ process: SharedStressProcess, timeout: Duration?) -> Duration {
    (timeout ?? process.authorizationTimeout * 4) + parameters.margin
  }

  func run() async -> SharedStressReport {
    let began = ContinuousClock.now
    for process in processes {
      let events = process.coordinator.events
      let (ledger, pauses, index) = (ledger, pauses, process.index)
      listeners.append(
        Task {
          for await event in events {
            switch event {
            case .signedOutElsewhere(let mcUid?):
              ledger.heardSignOut(process: index, mcUid: mcUid)
            case .retryScheduled:
              pauses.retryScheduled(process: index)
            default:
              break
            }
          }
        })
    }
    // Half the runs begin with expired sessions in the store (every user's first authorization
    // is a refresh), the others with an empty store.
    if rng.chance(50) {
      for user in users {
        let model = issuer.login(mcUid: user.account, lifetime: -1, by: "setup")
        await store.save(model, for: user)
      }
    }
    for _ in 0..<parameters.operations {
      if parameters.pauses {
        // Slower: a run with pauses needs time for flights (one key's flights follow each other
        // under the lease), not more callers.
        try? await Task.sleep(for: .microseconds(Int.random(in: 1_000...9_000, using: &rng)))
      } else if rng.chance(60) {
        try? await Task.sleep(for: .microseconds(Int.random(in: 100...2_500, using: &rng)))
      }
      // Room in the window: woken when a call or a logout ends, not polled.
      let ledger = ledger
      let window = parameters.window
      while ledger.outstanding >= window {
        try? await ledger.ended.waitUntil { ledger.outstanding < window }
      }
      perform()
    }
    let drained = await drain()
    for listener in listeners { listener.cancel() }
    var report = SharedStressReport(parameters: parameters)
    report.processes = processes.map {
      "\($0.index): deadline \($0.authorizationTimeout), lease \($0.leaseTimeToLive)"
    }
    report.users = users.count
    report.kinds = kinds
    report.faults = faults.counts
    report.pauses = pauses.counts
    report.drained = drained
    await finalChecks(&report)
    report.seconds = secondsSince(began)
    return report
  }

  // MARK: - Operations

  private func perform() {
    let process = processes[Int.random(in: 0..<processes.count, using: &rng)]
    let user = users[Int.random(in: 0..<users.count, using: &rng)]
    let roll = Double.random(in: 0..<100, using: &rng)
    switch roll {
    case ..<35:
      count("request")
      call(process, user, .ifNeeded)
    case ..<50:
      count("forced refresh of the token last seen")
      call(
        process, user,
        .force(rejecting: ledger.lastSeen(process: process.index, mcUid: user.account))
      )
    case ..<60:
      count("request with its own short timeout")
      call(process, user, .ifNeeded, timeout: .milliseconds(Int.random(in: 5...150, using: &rng)))
    case ..<70:
      count("cancel an outstanding call")
      let outstanding = ledger.outstandingCalls
      if let id = outstanding.randomElement(using: &rng), let task = tasks[id] {
        ledger.markCancelled(id)
        task.cancel()
      }
    case ..<75:
      count("request cancelled after 0-50 ms")
      let id = call(process, user, .ifNeeded)
      let after = Duration.milliseconds(Int.random(in: 0...50, using: &rng))
      if let task = tasks[id] {
        ledger.markCancelled(id)
        Task {
          try? await Task.sleep(for: after)
          task.cancel()
        }
      }
    case ..<76:
      count("logout")
      logout(process, user)
    case ..<77:
      count("wall clock step")
      faults.stepWallClock(by: Double.random(in: -2...2, using: &rng))
    default:
      count("burst of 3-10 callers over the processes")
      let forced = rng.chance(30)
      for _ in 0..<Int.random(in: 3...10, using: &rng) {
        let process = processes[Int.random(in: 0..<processes.count, using: &rng)]
        let refresh: RefreshPolicy =
          forced
          ? .force(rejecting: ledger.lastSeen(process: process.index, mcUid: user.account))
          : .ifNeeded
        call(process, user, refresh)
      }
    }
    // Forget the tasks of calls that ended.
    if tasks.count > 4 * parameters.window {
      let outstanding = Set(ledger.outstandingCalls)
      tasks = tasks.filter { outstanding.contains($0.key) }
    }
  }

  private func count(_ kind: String) { kinds[kind, default: 0] += 1 }

  @discardableResult
  private func call(
    _ process: SharedStressProcess, _ user: AccountKey, _ refresh: RefreshPolicy,
    timeout: Duration? = nil
  ) -> Int {
    let call = ledger.begin(
      process: process.index, key: user, refresh: refresh, timeout: timeout,
      deadline: process.authorizationTimeout, bound: bound(process, timeout: timeout))
    let (coordinator, ledger, issuer) = (process.coordinator, ledger, issuer)
    tasks[call.id] = Task {
      let result: Result<AuthModel, any Error>
      do {
        result = .success(
          try await coordinator.authModel(for: call.key, refresh: call.refresh, timeout: timeout))
      } catch {
        result = .failure(error)
      }
      ledger.finish(call, result, issuer: issuer)
    }
    return call.id
  }

  private func logout(_ process: SharedStressProcess, _ user: AccountKey) {
    let issuedBefore = issuer.issued
    ledger.logoutBegan(process: process.index, mcUid: user.account, issuedBefore: issuedBefore)
    let (coordinator, ledger, index) = (process.coordinator, ledger, process.index)
    let bound = process.authorizationTimeout + parameters.margin
    Task {
      let began = ContinuousClock.now
      await coordinator.accountStatusChanged(.logout(account: user.account))
      let elapsed = began.duration(to: .now)
      if elapsed > bound {
        ledger.violation("late", "a logout in process \(index) took \(elapsed) (bound \(bound))")
      }
      ledger.logoutReturned(process: index, mcUid: user.account, issuedBefore: issuedBefore)
    }
  }

  // MARK: - The end

  /// Waits until every call and logout ended, every authorizer call returned and no flight is
  /// left, within the longest bound and a second. False when that did not happen (a hang).
  private func drain() async -> Bool {
    func settled() -> Bool {
      ledger.outstanding == 0 && ledger.runningAuthorizations == 0 && ledger.leasesHeld == 0
        && processes.allSatisfy {
          let stats = $0.coordinator.statistics
          return stats.flightsInProgress == 0 && stats.waitingCallers == 0
        }
    }
    let longest = processes.map { bound($0, timeout: nil) }.max() ?? .zero
    let giveUp = ContinuousClock.now + longest * 2 + .seconds(1)
    // Woken when a call, an authorizer call or a hold ends; the bound wakes it once more.
    let ledger = ledger
    let quiet: @Sendable () -> Bool = {
      ledger.outstanding == 0 && ledger.runningAuthorizations == 0 && ledger.leasesHeld == 0
        || ContinuousClock.now >= giveUp
    }
    let alarm = Task {
      try? await Task.sleep(until: giveUp)
      ledger.ended.changed()
    }
    try? await ledger.ended.waitUntil(quiet)
    alarm.cancel()
    // The flights' tasks end right after their last hold is given back: the coordinators'
    // statistics (which signal nothing) settle within a few scheduler turns.
    while !settled(), ContinuousClock.now < giveUp {
      try? await Task.sleep(for: .milliseconds(1))
    }
    guard settled() else {
      let stuck = ledger.unfinished(limit: 10).map {
        "#\($0.id) process \($0.process) \($0.key.account) \($0.refresh), started "
          + "\($0.started.duration(to: .now)) ago"
      }
      ledger.violation(
        "hang",
        "\(ledger.outstanding) calls/logouts outstanding, \(ledger.runningAuthorizations) "
          + "authorizer calls running, \(ledger.leasesHeld) leases held, flights in progress "
          + "\(processes.map(\.coordinator.statistics.flightsInProgress)); first stuck: \(stuck)")
      for task in tasks.values { task.cancel() }
      return false
    }
    return true
  }

  private func finalChecks(_ report: inout SharedStressReport) async {
    // A reuse is inside the contract's stated window when the token's first spend left under
    // a live grant, its result was not stored before the reuse left, and the reuser held a
    // live grant when its request left: the first spender's grant ended (a pause, a starved
    // scheduler: the cause does not matter) after its request left and before its result was
    // stored, so the next holder found only the spent token. No client can close that one. Nor
    // the gap between the coordinator's last check of a grant and the request leaving (a grant
    // live when the request was handed over and lapsed when it left): counted apart. Every
    // other reuse is a violation, and one presented after the token's rotation was stored
    // always is.
    var excused: Set<Int> = []
    for reuse in issuer.reuses {
      let first = ledger.send(of: reuse.firstSpentBy)
      let second = ledger.send(of: reuse.reusedBy)
      let rotationStored = ledger.firstStored(among: issuer.descendants(of: reuse.token))
      let afterRotationStored = second.flatMap { s in rotationStored.map { $0 < s.left } } ?? false
      let gapAtTheSend = [first, second].contains {
        $0.map { $0.liveAtEntry && !$0.liveAtLeft } ?? false
      }
      if !afterRotationStored, first?.liveAtLeft == true, second?.liveAtLeft == true {
        report.reusesInsideWindow += 1
        excused.insert(reuse.family)
      } else if gapAtTheSend {
        report.reusesAtTheSend += 1
        excused.insert(reuse.family)
      } else {
        report.reusesOutsideWindow += 1
        let context =
          (afterRotationStored ? "; its rotation was stored before it was presented again" : "")
          + "; first spend left with a live grant \(first?.liveAtLeft.description ?? "never left"), the reuse \(second?.liveAtLeft.description ?? "never left")"
          + (ledger.reuseContext(of: reuse.reusedBy).map { "; \($0)" } ?? "")
        ledger.violation("refresh token reuse", reuse.description + context)
        report.reusesOutside.append(reuse.description + context)
      }
    }
    let revoked = issuer.revokedFamilies - excused.count
    if revoked > 0 { ledger.violation("revoked family", "\(revoked) families revoked") }
    for user in users {
      guard let model = await store.model(for: user) else { continue }
      if let problem = issuer.problem(withStored: model.refreshToken) {
        let family = model.refreshToken.flatMap(issuer.family(ofRefreshToken:))
        if let family, excused.contains(family), issuer.isRevoked(family) { continue }
        ledger.violation("stale store", "at the end the store for \(user.account) \(problem)")
      }
    }
    for process in processes {
      let stats = process.coordinator.statistics
      if !flightsBalance(stats) {
        ledger.violation("statistics", "process \(process.index): flights do not balance: \(stats)")
      }
      report.statistics.append(stats)
    }
    let logouts = ledger.logouts
    if logouts.started != logouts.finished {
      ledger.violation(
        "hang", "logouts: \(logouts.started) started, \(logouts.finished) returned")
    }
    if ledger.finished != ledger.started {
      ledger.violation("hang", "calls: \(ledger.started) started, \(ledger.finished) ended")
    }
    report.calls = ledger.started
    report.logouts = logouts.started
    report.heardSignOuts = logouts.heard
    report.outcomes = ledger.outcomes
    report.issuer = issuer.counts
    report.tokenRequests = issuer.requests
    report.unavailableAnswers = issuer.unavailableAnswers
    report.overlaps = ledger.overlaps
    report.worstOvershoot = ledger.worstOvershoot
    report.worstInDeadlines = ledger.worstInDeadlines
    (report.violationCount, report.categories, report.violations) = ledger.violations
  }
}

/// What a shared-lease stress run did and found.
struct SharedStressReport: Sendable {
  var parameters: SharedStressParameters
  var processes: [String] = []
  var users = 0
  var calls = 0
  var logouts = 0
  var heardSignOuts = 0
  var kinds: [String: Int] = [:]
  var faults = SharedStressFaults.Counts()
  var pauses = SharedStressPauses.Counts()
  var tokenRequests = 0
  var unavailableAnswers = 0
  var reusesInsideWindow = 0
  var reusesOutsideWindow = 0
  /// Reuses where a request's grant was live when the coordinator handed it to the authorizer
  /// and lapsed before it left (the gap between the last check and the send; counted apart).
  var reusesAtTheSend = 0
  /// Each reuse outside the window, with the pauses its reuser's process had just had.
  var reusesOutside: [String] = []
  var outcomes: [String: Int] = [:]
  var issuer = (logins: 0, refreshes: 0, invalidGrants: 0)
  var overlaps = (afterLapse: 0, withAbandoned: 0, withHung: 0, withoutLiveLease: 0)
  var worstOvershoot = Duration.zero
  var worstInDeadlines = 0.0
  var statistics: [AuthCoordinator.Statistics] = []
  var drained = false
  var seconds = 0.0
  var violationCount = 0
  var categories: [String: Int] = [:]
  var violations: [String] = []

  /// The figures of the pauses and the reuses, in one line that can be quoted.
  var pausesLine: String {
    let fired = SharedStressPauses.Kind.allCases.map {
      "\($0.rawValue)=\(pauses.fired[$0, default: 0])"
    }
    let shortest =
      pauses.shortestInTimeToLives.isFinite
      ? String(format: "%.2f", pauses.shortestInTimeToLives) : "-"
    return "pauses: \(fired.joined(separator: " ")) (back-offs retried while paused "
      + "\(pauses.backOffsRetried)), longest \(pauses.longest), shortest \(shortest) TTLs; "
      + "token requests \(tokenRequests) (503s \(unavailableAnswers)); refresh-token reuses "
      + "inside the stated window \(reusesInsideWindow), in the gap at the send "
      + "\(reusesAtTheSend), outside both \(reusesOutsideWindow)"
  }

  var summary: String {
    func list(_ counts: [String: Int]) -> String {
      counts.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
    }
    func sum(_ field: (AuthCoordinator.Statistics) -> Int) -> Int {
      statistics.map(field).reduce(0, +)
    }
    return """
      SharedLeaseStress: \(parameters)
        \(processes.count) processes (\(processes.joined(separator: "; "))), \(users) users, \
      \(String(format: "%.2f", seconds)) s
        calls \(calls), logouts \(logouts) (heard elsewhere \(heardSignOuts) times)
        operations by kind: \(list(kinds))
        faults: saves failed \(faults.failedSaves), renewals failed \(faults.failedRenewals), \
      authorizer calls hung \(faults.hungCalls), wall clock steps \(faults.clockSteps) (offset \
      \(String(format: "%+.2f", faults.offset)) s at the end); unsaved models \
      \(sum(\.unsavedModels)), save retries \(sum(\.saveRetries)), leases lost \
      \(sum(\.leasesLost)), holds ended \(sum(\.holdsEnded))
        outcomes: \(list(outcomes))
        issuer: logins \(issuer.logins) refreshes \(issuer.refreshes) invalid grants \
      \(issuer.invalidGrants)
        authorizations \(sum(\.authorizationsStarted)), adopted from store \
      \(sum(\.adoptedFromStore)), late results saved \(sum(\.lateResultsSaved)) discarded \
      \(sum(\.lateResultsDiscarded)), flights timed out \(sum(\.flightsTimedOut))
        refresh overlaps across processes after the holder's lease lapsed \
      \(overlaps.afterLapse), with an abandoned call \(overlaps.withAbandoned), with a hung call \
      \(overlaps.withHung); authorizer calls \
      begun without this process holding a live lease \(overlaps.withoutLiveLease)
        worst overshoot of a caller's own timeout \(worstOvershoot); longest call without one \
      \(String(format: "%.2f", worstInDeadlines)) deadlines; drained \(drained)
        \(pausesLine)\(reusesOutside.map { "\n    reuse outside the window: \($0)" }.joined())
        invariant violations: \(violationCount) \(list(categories))
      """
  }
}
