import AlipayBridge
import AuthCoordinator
import Foundation

/// One run of the `simulate` demo.
struct Simulation {
  let options: SimulateCommand.Options

  struct Report {
    var summary: String
    var asExpected: Bool
  }

  /// How the calls of one wave ended.
  struct Tally {
    var served = 0
    var failures: [String: Int] = [:]
    var tokens: Set<String> = []

    mutating func add(_ result: Result<AuthModel, any Error>) {
      switch result {
      case .success(let model):
        served += 1
        tokens.insert(model.accessToken)
      case .failure(let error as AuthCoordinatorError):
        failures[error.code.rawValue, default: 0] += 1
      case .failure(let error):
        failures["\(type(of: error))", default: 0] += 1
      }
    }

    var text: String {
      var parts = ["\(served) served"]
      for (code, count) in failures.sorted(by: { $0.key < $1.key }) {
        parts.append("\(count) failed with \(code)")
      }
      return parts.joined(separator: ", ")
    }

    func count(_ code: AuthCoordinatorError.Code) -> Int { failures[code.rawValue] ?? 0 }

    /// The tallies added up.
    static func merged(_ tallies: [Tally]) -> Tally {
      var sum = Tally()
      for tally in tallies {
        sum.served += tally.served
        sum.failures.merge(tally.failures, uniquingKeysWith: +)
        sum.tokens.formUnion(tally.tokens)
      }
      return sum
    }
  }

  /// Plays the scenario on `clock`, a ``VirtualClock`` (see ``VirtualWorld``).
  func run(clock: VirtualClock) async -> Report {
    let timeline = Timeline(clock: clock, quiet: options.quiet)
    let behaviour: SimulatedAlipayApp.UserBehaviour =
      options.neverReturn
      ? .neverReturns
      : options.returnWithoutAuthorizing
        ? .returnsWithoutAuthorizing(after: options.thinkTime)
        : .authorizes(after: options.thinkTime)
    // With --processes N > 1, SIMULATED processes: N coordinators in this one OS process (see
    // ``SimulatedProcess``). With 1 (the default), the app alone, as before.
    let processes = SimulatedProcess.all(count: options.processes)
    let multiprocess = processes.count > 1
    let coordinatorBox = CoordinatorBox()
    let logoutDone = Counter()
    let logoutOnBounce: (@Sendable () async -> Void)? =
      options.logoutMidFlight
      ? { @Sendable in
        let coordinators = coordinatorBox.coordinators
        guard let coordinator = coordinators.first, logoutDone.increment() == 1 else {
          return
        }
        // Log out once every open of the wave waits, so that none arrives after the logout
        // (such a caller would rightly start a new flight for the new session).
        let total = options.opens * options.users
        while coordinators.contains(where: { $0.statistics.waitingCallers < total }) {
          await Task.yield()
        }
        timeline.log("the app's user logs out while the authorization is in flight")
        await coordinator.accountStatusChanged(.logoutAll)
      } : nil
    // The refresh family ends five token lifetimes after each sign-in.
    let server = SimulatedIntegratorServer(
      clock: clock, latency: .milliseconds(300), tokenLifetime: options.tokenLifetime,
      familyLifetime: options.tokenLifetime * 5, timeline: timeline)
    let gateway = server.gateway
    let alipay = SimulatedAlipayApp(
      scheme: "mpaasinsidedemo", clock: clock, behaviour: behaviour, timeline: timeline,
      onBounce: logoutOnBounce,
      issueCode: { mcUid in
        let user = Self.alipayUser(mcUid)
        return (gateway.issueCode(forUser: user), user)
      })
    let provider = AlipayAuthCodeProvider(
      clock: clock,
      authURL: { request in
        // The integrator's server would sign this; the request id travels as `state`.
        URL(
          string: "https://integrator.example/authorize?state=\(request.requestID)"
            + "&mc_uid=\(request.key.mcUid)")!
      },
      open: { url in await alipay.open(url) })
    let router = AlipayCallbackRouter(
      provider: provider, appSchemes: [alipay.scheme], accountConnect: { _ in }, payment: { _ in })
    alipay.connect(router: router, provider: provider)

    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: options.authorizationTimeout, exchangeTimeout: .seconds(30),
      refreshLeeway: .seconds(60))
    configuration.clock = clock
    configuration.now = { timeline.date }
    configuration.random = { 0.5 }  // the same jitter on every run
    let coordinators: [AuthCoordinator]
    let printers: [Task<Void, Never>]
    var announcements: OrderedLeaseAnnouncements?
    if !multiprocess {
      let coordinator = AuthCoordinator(
        store: InMemoryTokenStore(),
        authorizer: Self.authorizer(provider: provider, server: server),
        configuration: configuration,
        onAccountStatusChange: { change in
          timeline.log("SDK told: account status changed (\(change))")
        })
      coordinators = [coordinator]
      printers = [
        Task { for await event in coordinator.events { Self.describe(event).map(timeline.log) } },
        Task { for await event in provider.events { Self.describe(event).map(timeline.log) } },
      ]
    } else {
      (coordinators, printers, announcements) = Self.start(
        processes, configuration: configuration, appProvider: provider, server: server,
        clock: clock, timeline: timeline)
    }
    let coordinator = coordinators[0]  // the app's

    coordinatorBox.coordinators = coordinators
    let users = (0..<options.users).map { AccountKey(mcUid: "user-\($0 + 1)") }
    let perWave = options.opens * users.count * coordinators.count
    var waves: [(String, Tally)] = []
    var perProcess = [Tally](repeating: Tally(), count: coordinators.count)
    var opens = 0
    var expectations: [Bool] = []
    // Authorizations started by each wave, in every process together.
    var authorizationsPerWave: [Int] = []
    var bouncesPerWave: [Int] = []
    func authorizations() -> Int {
      coordinators.map(\.statistics.authorizationsStarted).reduce(0, +)
    }
    /// Opens every mini-program of a wave at once in every process and records the outcome.
    func playWave(_ name: String) async -> Tally {
      let before = authorizations()
      let bouncesBefore = alipay.bounces
      defer { bouncesPerWave.append(alipay.bounces - bouncesBefore) }
      let byProcess = await wave(coordinators, users: users)
      let tally = Tally.merged(byProcess)
      perProcess = zip(perProcess, byProcess).map { Tally.merged([$0, $1]) }
      opens += perWave
      waves.append((name, tally))
      await clock.world.settled()  // the flight's events first
      authorizationsPerWave.append(authorizations() - before)
      return tally
    }

    // Wave 1: every mini-program opens at once on a cold start.
    timeline.log(
      multiprocess
        ? "\(perWave) mini-program opens at once, \(options.opens * users.count) in each process "
          + "(cold start)"
        : "\(perWave) mini-program opens at once (cold start)")
    let first = await playWave("cold start")
    timeline.log("wave 1 done: \(first.text)")

    let userCompletes = !options.neverReturn && !options.returnWithoutAuthorizing
    if options.neverReturn {
      expectations.append(first.count(.timedOut) == opens)
    } else if options.returnWithoutAuthorizing {
      // The app's callers are abandoned; an extension cannot send the user to Alipay itself.
      let appOpens = options.opens * users.count
      expectations.append(
        first.count(.abandoned) == appOpens
          && first.count(.interactionRequired) == opens - appOpens)
    } else if options.logoutMidFlight {
      expectations.append(first.count(.signedOut) == opens)
    } else {
      expectations.append(first.served == opens && first.tokens.count == users.count)
    }

    if userCompletes && !options.logoutMidFlight {
      // Wave 2: the same opens again, answered from the cache.
      timeline.log("\(perWave) more opens while the token is valid")
      let second = await playWave("cache hits")
      timeline.log("wave 2 done: \(second.text)")
      expectations.append(second.served == perWave)

      // Wave 3: after the token expired, one refresh per user serves everyone.
      try? await clock.sleep(for: options.tokenLifetime)
      timeline.log("the tokens expired; \(perWave) opens")
      let third = await playWave("after expiry")
      timeline.log("wave 3 done: \(third.text)")
      expectations.append(third.served == perWave)
      // Wave 3 needed no bounce: the integrator's server refreshed the token.
      expectations.append(bouncesPerWave.last == 0)

      if options.refreshLoop {
        timeline.log("the container rejects every token it gets (NeedRefreshToken = YES)")
        var loop = Tally()
        let loopBounces = alipay.bounces
        for _ in 0..<6 {
          let result = await Result {
            try await coordinator.authModel(
              for: users[0], extendParams: ["NeedRefreshToken": "YES"])
          }
          opens += 1
          loop.add(result)
        }
        perProcess[0] = Tally.merged([perProcess[0], loop])
        waves.append(("refresh loop", loop))
        bouncesPerWave.append(alipay.bounces - loopBounces)
        await clock.world.settled()
        timeline.log("refresh loop done: \(loop.text)")
        expectations.append(loop.count(.refreshLoop) == 3)
      }
      if !options.refreshLoop && !multiprocess {
        let (cancelled, bounces) = await silentStory(
          server: server, alipay: alipay, coordinator: coordinator, users: users, clock: clock,
          timeline: timeline, expectations: &expectations, playWave: playWave)
        opens += cancelled.served + cancelled.failures.values.reduce(0, +)
        waves.append(("cancelled in Alipay, NeedRefreshToken", cancelled))
        bouncesPerWave.append(bounces)
      }
    }

    if options.logoutMidFlight {
      // The user still authorizes in Alipay: the late callback must be rejected, not exchanged.
      try? await clock.sleep(for: options.thinkTime)
      await clock.world.settled()
      expectations.append(server.exchanges == 0)
    }

    // Let the last events reach the timeline before the summary.
    await clock.world.settled()
    for printer in printers { printer.cancel() }
    announcements?.stop()

    var stats = AuthCoordinator.Statistics()
    for each in coordinators {
      let part = each.statistics
      stats.authorizationsStarted += part.authorizationsStarted
      stats.coalescedCallers += part.coalescedCallers
      stats.cacheHits += part.cacheHits
      stats.flightsTimedOut += part.flightsTimedOut
      stats.refreshLoopsStopped += part.refreshLoopsStopped
    }
    var lines = ["", "Summary"]
    lines.append("  mini-program opens ........... \(opens)")
    lines.append("  authorizations ............... \(stats.authorizationsStarted)")
    lines.append("  bounces to Alipay ............ \(alipay.bounces)")
    lines.append("  token exchanges .............. \(server.exchanges)")
    lines.append("  silent refreshes ............. \(server.silentRefreshes)")
    lines.append("  Alipay gateway calls ......... \(gateway.counters.requests)")
    lines.append("  refresh-token reuses ......... \(gateway.counters.reuses)")
    expectations.append(gateway.counters.reuses == 0 && gateway.counters.invalidSignatures == 0)
    lines.append("  callers that shared a flight . \(stats.coalescedCallers)")
    lines.append("  cache hits ................... \(stats.cacheHits)")
    lines.append("  timeouts ..................... \(stats.flightsTimedOut) flight(s)")
    lines.append(
      "  abandoned (no callback) ...... \(waves.map { $0.1.count(.abandoned) }.reduce(0, +)) call(s)"
    )
    lines.append(
      "  signed out mid-flight ........ \(waves.map { $0.1.count(.signedOut) }.reduce(0, +)) call(s)"
    )
    lines.append("  loop-guard stops ............. \(stats.refreshLoopsStopped)")
    for ((name, tally), bounces) in zip(
      waves, bouncesPerWave + Array(repeating: 0, count: waves.count))
    {
      lines.append("  \(name): \(tally.text), \(bounces) bounce(s)")
    }
    if multiprocess {
      lines += processSummary(
        processes: processes, coordinators: coordinators, served: perProcess,
        authorizationsPerWave: authorizationsPerWave, users: users.count,
        expectations: &expectations)
    }
    let asExpected = !expectations.contains(false)
    lines.append(asExpected ? "Result: as expected" : "Result: NOT as expected")
    return Report(summary: lines.joined(separator: "\n"), asExpected: asExpected)
  }

  /// Starts the coordinators of `--processes N` (N > 1), the app's first, and the tasks that
  /// print their events: SIMULATED processes sharing one store and one lease (see
  /// ``SimulatedProcess``).
  private static func start(
    _ processes: [SimulatedProcess], configuration: AuthCoordinator.Configuration,
    appProvider: AlipayAuthCodeProvider, server: SimulatedIntegratorServer, clock: VirtualClock,
    timeline: Timeline
  ) -> (
    coordinators: [AuthCoordinator], printers: [Task<Void, Never>],
    announcements: OrderedLeaseAnnouncements
  ) {
    timeline.log(
      "\(processes.count) SIMULATED processes: coordinators in this one OS process, each with "
        + "its own memory, sharing one token store and one authorization lease (as an app and "
        + "its extensions share a file store and a file lease)")
    timeline.log(
      "the app may send the user to Alipay; "
        + "\(processes.dropFirst().map(\.name).joined(separator: ", ")) may not "
        + "(allowsInteraction = false)")
    let store = InMemoryTokenStore()
    let lease = InMemoryAuthorizationLease(now: { timeline.date })
    let ledger = SharedLedger()
    let announcements = OrderedLeaseAnnouncements(lease)
    var coordinators: [AuthCoordinator] = []
    var printers: [Task<Void, Never>] = []
    for process in processes {
      var processConfiguration = configuration
      processConfiguration.allowsInteraction = process.allowsInteraction
      // An extension cannot open Alipay: its provider's opener refuses (and the authorizer
      // throws interaction_required before it gets there).
      let provider =
        process.allowsInteraction
        ? appProvider
        : AlipayAuthCodeProvider(
          clock: clock,
          authURL: { request in
            URL(string: "https://integrator.example/authorize?state=\(request.requestID)")!
          },
          open: { _ in false })
      let coordinator = AuthCoordinator(
        store: ProcessTokenStore(
          process: process, shared: store, ledger: ledger, timeline: timeline),
        lease: ProcessLease(
          process: process, shared: lease, announcements: announcements, ledger: ledger,
          timeline: timeline),
        authorizer: authorizer(provider: provider, server: server),
        configuration: processConfiguration,
        onAccountStatusChange: { change in
          timeline.log("\(process.name): SDK told: account status changed (\(change))")
        })
      coordinators.append(coordinator)
      printers.append(
        Task {
          for await event in coordinator.events {
            describe(event, in: process, ledger: ledger).map(timeline.log)
          }
        })
      if process.allowsInteraction {
        printers.append(
          Task {
            for await event in provider.events {
              describe(event).map { timeline.log("\(process.name): \($0)") }
            }
          })
      }
    }
    return (coordinators, printers, announcements)
  }

  /// The summary of `--processes N`: what each simulated process served, and whether they
  /// shared one authorization per user (adds that check to `expectations`).
  private func processSummary(
    processes: [SimulatedProcess], coordinators: [AuthCoordinator], served: [Tally],
    authorizationsPerWave: [Int], users: Int, expectations: inout [Bool]
  ) -> [String] {
    var lines = [
      "  simulated processes .......... \(processes.count) (coordinators in one OS process, "
        + "sharing one store and one lease)"
    ]
    for (index, process) in processes.enumerated() {
      let stats = coordinators[index].statistics
      let label = "  \(process.name) ".padding(toLength: 32, withPad: ".", startingAt: 0)
      lines.append(
        "\(label) \(served[index].text); \(stats.authorizationsStarted) authorization(s), "
          + "\(stats.adoptedFromStore) adopted from the store")
    }
    // Every wave of opens that needed a token (the cold start, the expiry) authorized each user
    // once, in one process, however many processes opened at once.
    let userCompletes =
      !options.neverReturn && !options.returnWithoutAuthorizing && !options.logoutMidFlight
    if userCompletes {
      let expected = [users, 0, users]
      let shared = authorizationsPerWave == expected
      lines.append(
        "  one authorization per user ... "
          + (shared
            ? "yes: one per user per wave that needed one, in \(processes.count) processes "
              + "(\(authorizationsPerWave.reduce(0, +)) for \(users) user(s))"
            : "NO: \(authorizationsPerWave) per wave, expected \(expected)"))
      expectations.append(shared)
      // Each widget served its callers by adopting what the app stored, once per such wave.
      let adopted = coordinators.dropFirst().allSatisfy {
        $0.statistics.adoptedFromStore == 2 * users
      }
      expectations.append(adopted)
    }
    return lines
  }

  /// Opens `options.opens` mini-programs per user in each process at once (the app's first)
  /// and tallies the outcomes per process.
  private func wave(_ coordinators: [AuthCoordinator], users: [AccountKey]) async -> [Tally] {
    await withTaskGroup(of: (Int, Result<AuthModel, any Error>).self) { group in
      for (index, coordinator) in coordinators.enumerated() {
        for user in users {
          for _ in 0..<options.opens {
            group.addTask { (index, await Result { try await coordinator.authModel(for: user) }) }
          }
        }
      }
      var tallies = [Tally](repeating: Tally(), count: coordinators.count)
      for await (index, result) in group { tallies[index].add(result) }
      return tallies
    }
  }

}

/// Lets the simulated Alipay app reach the coordinators that are created after it (the app's
/// first).
final class CoordinatorBox: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: [AuthCoordinator] = []
  var coordinators: [AuthCoordinator] {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}

extension Result where Failure == any Error {
  init(catching body: () async throws -> Success) async {
    do { self = .success(try await body()) } catch { self = .failure(error) }
  }
}
