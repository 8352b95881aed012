import AuthCoordinator
import AuthCoordinatorPostgreSQL
import Foundation

/// One replica process: a coordinator on the shared database, `callers` concurrent requests for
/// one key once the parent says go, and a result file.
enum Replica {
  struct Result: Codable {
    var replica: Int
    var served = 0
    var calls = 0
    /// The first few failures' messages (at most 5).
    var failed: [String] = []
    /// How many calls failed, and the last failure with its time (seconds since the start).
    var failedCalls = 0
    var lastFailure: String?
    var lastFailed: Double?
    var tokens: [String] = []
    /// Callers' latencies in milliseconds, sorted.
    var latencies: [Double] = []
    /// Seconds since the run's start when the first and the last caller were served.
    var firstServed: Double?
    var lastServed: Double?
  }

  static func run(_ options: Options) async throws {
    let directory = URL(fileURLWithPath: options.directory)
    let epoch = Date(timeIntervalSince1970: options.epoch)
    let database = try await PostgresDatabase(
      PostgresConfiguration(
        connectionString: options.connection, schema: options.schema, poolSize: 4,
        listens: !options.pollOnly))
    defer { database.close() }
    let soaking = options.soakSeconds > 0
    let provider = SimulatedIdentityProvider(
      directory: directory, replica: options.index, delay: .milliseconds(options.delayMilliseconds),
      lifetime: soaking ? Double(options.lifetimeMilliseconds) / 1000 : 3600, epoch: epoch)
    let store = PostgresTokenStore(database: database)
    let coordinator = AuthCoordinator(
      store: store, lease: PostgresAuthorizationLease(database: database, readingFrom: store),
      authorizer: provider.authorizer,
      configuration: AuthCoordinator.Configuration(
        authorizationTimeout: .seconds(30),
        // In a soak the tokens live about a second: the leeway is a fifth of that, so a token
        // is refreshed shortly before it expires and never counts for the loop guard.
        refreshLeeway: soaking ? .milliseconds(options.lifetimeMilliseconds / 5) : .seconds(60),
        leaseTimeToLive: .milliseconds(options.timeToLiveMilliseconds)))
    let key = AccountKey(account: options.account)

    _ = FileManager.default.createFile(
      atPath: directory.appending(path: "ready-\(options.index)").path, contents: Data())
    while !FileManager.default.fileExists(atPath: directory.appending(path: "go").path) {
      try await Task.sleep(for: .milliseconds(2))
    }
    // Without a soak each caller asks once; in a soak each keeps asking (every 5 ms, a
    // service's request rate) until the soak ends.
    let soakEnd = ContinuousClock.now + .seconds(options.soakSeconds)
    typealias Outcome = (token: String?, failure: String?, latency: Double, at: Date)
    let outcomes = await withTaskGroup(of: [Outcome].self) { group in
      for _ in 0..<options.callers {
        group.addTask {
          var outcomes: [Outcome] = []
          repeat {
            let start = ContinuousClock.now
            do {
              let model = try await coordinator.authModel(for: key, timeout: .seconds(30))
              outcomes.append(
                (model.accessToken, nil, Self.milliseconds(start.duration(to: .now)), Date()))
            } catch {
              outcomes.append(
                (nil, "\(error)", Self.milliseconds(start.duration(to: .now)), Date()))
            }
            if soaking { try? await Task.sleep(for: .milliseconds(5)) }
          } while soaking && ContinuousClock.now < soakEnd
          return outcomes
        }
      }
      return await group.reduce(into: []) { $0 += $1 }
    }
    var result = Result(replica: options.index)
    result.calls = outcomes.count
    for (token, failure, latency, at) in outcomes {
      result.latencies.append(latency)
      if let token {
        result.served += 1
        if !result.tokens.contains(token) { result.tokens.append(token) }
        let served = at.timeIntervalSince(epoch)
        result.firstServed = min(result.firstServed ?? served, served)
        result.lastServed = max(result.lastServed ?? served, served)
      }
      if let failure {
        result.failedCalls += 1
        if result.failed.count < 5 { result.failed.append(failure) }
        let failed = at.timeIntervalSince(epoch)
        if failed >= result.lastFailed ?? failed {
          result.lastFailed = failed
          result.lastFailure = failure
        }
      }
    }
    result.latencies.sort()
    try JSONEncoder().encode(result).write(
      to: directory.appending(path: "result-\(options.index).json"), options: .atomic)
  }

  private static func milliseconds(_ duration: Duration) -> Double {
    let (seconds, attoseconds) = duration.components
    return Double(seconds) * 1000 + Double(attoseconds) / 1e15
  }
}
