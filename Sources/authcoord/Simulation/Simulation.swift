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
    let coordinatorBox = CoordinatorBox()
    let logoutDone = Counter()
    let logoutOnBounce: (@Sendable () async -> Void)? =
      options.logoutMidFlight
      ? { @Sendable in
        guard let coordinator = coordinatorBox.coordinator, logoutDone.increment() == 1 else {
          return
        }
        // Log out once every open of the wave waits, so that none arrives after the logout
        // (such a caller would rightly start a new flight for the new session).
        let total = options.opens * options.users
        while coordinator.statistics.waitingCallers < total { await Task.yield() }
        timeline.log("the app's user logs out while the authorization is in flight")
        await coordinator.accountStatusChanged(.logoutAll)
      } : nil
    let alipay = SimulatedAlipayApp(
      scheme: "mpaasinsidedemo", clock: clock, behaviour: behaviour, timeline: timeline,
      onBounce: logoutOnBounce)
    let server = SimulatedIntegratorServer(
      clock: clock, latency: .milliseconds(300), tokenLifetime: options.tokenLifetime,
      timeline: timeline)
    let provider = AlipayAuthCodeProvider(
      clock: clock,
      authURL: { request in
        // The integrator's server would sign this; the request id travels as `state`.
        URL(string: "https://integrator.example/authorize?state=\(request.requestID)")!
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
    let coordinator = AuthCoordinator(
      store: InMemoryTokenStore(),
      authorizer: AlipayAuthorizer(provider: provider, exchanger: server),
      configuration: configuration,
      onAccountStatusChange: { change in
        timeline.log("SDK told: account status changed (\(change))")
      })

    coordinatorBox.coordinator = coordinator
    let printers = [
      Task { for await event in coordinator.events { Self.describe(event).map(timeline.log) } },
      Task { for await event in provider.events { Self.describe(event).map(timeline.log) } },
    ]

    let users = (0..<options.users).map { AccountKey(mcUid: "user-\($0 + 1)") }
    var waves: [(String, Tally)] = []
    var opens = 0
    var expectations: [Bool] = []

    // Wave 1: every mini-program opens at once on a cold start.
    timeline.log("\(options.opens * users.count) mini-program opens at once (cold start)")
    let first = await wave(coordinator, users: users)
    opens += options.opens * users.count
    waves.append(("cold start", first))
    await clock.world.settled()  // the flight's events first
    timeline.log("wave 1 done: \(first.text)")

    let userCompletes = !options.neverReturn && !options.returnWithoutAuthorizing
    if options.neverReturn {
      expectations.append(first.count(.timedOut) == opens)
    } else if options.returnWithoutAuthorizing {
      expectations.append(first.count(.abandoned) == opens)
    } else if options.logoutMidFlight {
      expectations.append(first.count(.signedOut) == opens)
    } else {
      expectations.append(first.served == opens && first.tokens.count == users.count)
    }

    if userCompletes && !options.logoutMidFlight {
      // Wave 2: the same opens again, answered from the cache.
      timeline.log("\(options.opens * users.count) more opens while the token is valid")
      let second = await wave(coordinator, users: users)
      opens += options.opens * users.count
      waves.append(("cache hits", second))
      await clock.world.settled()
      timeline.log("wave 2 done: \(second.text)")
      expectations.append(second.served == options.opens * users.count)

      // Wave 3: after the token expired, one refresh per user serves everyone.
      try? await clock.sleep(for: options.tokenLifetime)
      timeline.log("the tokens expired; \(options.opens * users.count) opens")
      let third = await wave(coordinator, users: users)
      opens += options.opens * users.count
      waves.append(("after expiry", third))
      await clock.world.settled()
      timeline.log("wave 3 done: \(third.text)")
      expectations.append(third.served == options.opens * users.count)

      if options.refreshLoop {
        timeline.log("the container rejects every token it gets (NeedRefreshToken = YES)")
        var loop = Tally()
        for _ in 0..<6 {
          let result = await Result {
            try await coordinator.authModel(
              for: users[0], extendParams: ["NeedRefreshToken": "YES"])
          }
          opens += 1
          loop.add(result)
        }
        waves.append(("refresh loop", loop))
        await clock.world.settled()
        timeline.log("refresh loop done: \(loop.text)")
        expectations.append(loop.count(.refreshLoop) == 3)
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

    let stats = coordinator.statistics
    var lines = ["", "Summary"]
    lines.append("  mini-program opens ........... \(opens)")
    lines.append("  authorizations ............... \(stats.authorizationsStarted)")
    lines.append("  bounces to Alipay ............ \(alipay.bounces)")
    lines.append("  token exchanges .............. \(server.exchanges)")
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
    for (name, tally) in waves { lines.append("  \(name): \(tally.text)") }
    let asExpected = !expectations.contains(false)
    lines.append(asExpected ? "Result: as expected" : "Result: NOT as expected")
    return Report(summary: lines.joined(separator: "\n"), asExpected: asExpected)
  }

  /// Opens `options.opens` mini-programs per user at once and tallies the outcomes.
  private func wave(_ coordinator: AuthCoordinator, users: [AccountKey]) async -> Tally {
    await withTaskGroup(of: Result<AuthModel, any Error>.self) { group in
      for user in users {
        for _ in 0..<options.opens {
          group.addTask { await Result { try await coordinator.authModel(for: user) } }
        }
      }
      var tally = Tally()
      for await result in group { tally.add(result) }
      return tally
    }
  }

  private static func describe(_ event: AuthEvent) -> String? {
    switch event {
    case .flightStarted(let key, let flight):
      return "flight #\(flight) for \(key.mcUid) started"
    case .authorizationStarted(let key, let flight, let reason):
      return "flight #\(flight): authorizing \(key.mcUid) (\(reason))"
    case .flightSucceeded(let key, let flight, let waiters):
      return "flight #\(flight) for \(key.mcUid) succeeded: \(waiters) waiting callers served"
    case .flightFailed(let key, let flight, let code):
      return "flight #\(flight) for \(key.mcUid) failed: \(code)"
    case .flightTimedOut(let key, let flight, let phase):
      return "flight #\(flight) for \(key.mcUid) timed out in the \(phase.rawValue) phase"
    case .flightCancelled(let key, let flight, let reason):
      return "flight #\(flight) for \(key.mcUid) cancelled (\(reason.rawValue))"
    case .lateResultDiscarded(let key, let flight):
      return "a late result for flight #\(flight) (\(key.mcUid)) was discarded"
    case .lateResultSaved(let key, let flight):
      return "a late result for flight #\(flight) (\(key.mcUid)) was stored, not served"
    case .adoptedFromStore(let key, let flight):
      return "flight #\(flight) adopted the model another process stored for \(key.mcUid)"
    case .signedOutElsewhere(let mcUid):
      return "signed out in another process: \(mcUid ?? "everyone")"
    case .refreshLoopStopped(let key):
      return "loop guard: not bouncing \(key.mcUid) to Alipay again"
    case .storeFailed(_, let operation, let message):
      return "store \(operation.rawValue) failed: \(message)"
    case .accountStatusChanged(let change):
      return "account status changed: \(change)"
    case .evicted:
      return nil
    }
  }

  private static func describe(_ event: BridgeEvent) -> String? {
    switch event {
    case .callbackMatched: return "callback matched the pending request"
    case .callbackRejected(let reason, _): return "callback rejected (\(reason))"
    case .abandonedAfterReturn: return "the user came back without a callback: abandoned"
    case .opened, .openFailed: return nil
    }
  }
}

/// Lets the simulated Alipay app reach the coordinator that is created after it.
final class CoordinatorBox: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: AuthCoordinator?
  var coordinator: AuthCoordinator? {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}

extension Result where Failure == any Error {
  init(catching body: () async throws -> Success) async {
    do { self = .success(try await body()) } catch { self = .failure(error) }
  }
}
