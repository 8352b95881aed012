import AuthCoordinator
import Foundation

/// One request the simulated service handles: it asks the real coordinator for the shared
/// token and calls the simulated API with it, the way a bearer client does. On a 401 it asks
/// for a forced refresh of exactly the token that was rejected
/// (`refresh: .force(rejecting: thatToken)`, so that concurrent rejections of the same token
/// share one refresh) and retries once; a second 401 is the request's answer.
struct ServiceRequest: Sendable {
  /// How one request ended.
  enum Outcome: Sendable {
    /// 200 OK; `retried` after a 401 and a forced refresh.
    case ok(retried: Bool)
    /// The coordinator threw (its error code), or the API said 401 after the retry.
    case failed(String)
  }

  let coordinator: AuthCoordinator
  let resource: SimulatedResourceServer
  let key: AccountKey

  func run() async -> Outcome {
    do {
      let model = try await coordinator.authModel(for: key)
      if await resource.call(bearer: model.accessToken) == 200 { return .ok(retried: false) }
      let fresh = try await coordinator.authModel(
        for: key, refresh: .force(rejecting: model.accessToken))
      if await resource.call(bearer: fresh.accessToken) == 200 { return .ok(retried: true) }
      return .failed("401 after a refresh")
    } catch let error as AuthCoordinatorError {
      return .failed(error.code.rawValue)
    } catch {
      return .failed("\(type(of: error))")
    }
  }

  /// Runs `count` requests at once and tallies how they ended.
  func wave(_ count: Int) async -> ServiceTally {
    await withTaskGroup(of: Outcome.self) { group in
      for _ in 0..<count {
        group.addTask { await run() }
      }
      var tally = ServiceTally()
      for await outcome in group { tally.add(outcome) }
      return tally
    }
  }
}

/// How the requests of one wave (or of several) ended.
struct ServiceTally: Sendable, Equatable {
  var served = 0
  var retried = 0
  var failures: [String: Int] = [:]

  var failed: Int { failures.values.reduce(0, +) }

  mutating func add(_ outcome: ServiceRequest.Outcome) {
    switch outcome {
    case .ok(let retried):
      served += 1
      if retried { self.retried += 1 }
    case .failed(let code):
      failures[code, default: 0] += 1
    }
  }

  mutating func add(_ other: ServiceTally) {
    served += other.served
    retried += other.retried
    failures.merge(other.failures, uniquingKeysWith: +)
  }

  func count(_ code: AuthCoordinatorError.Code) -> Int { failures[code.rawValue] ?? 0 }

  /// `2000 served`, `1990 served (10 after a retry), 10 failed with timed_out`.
  var text: String {
    var parts = [retried > 0 ? "\(served) served (\(retried) after a retry)" : "\(served) served"]
    for (code, count) in failures.sorted(by: { $0.key < $1.key }) {
      parts.append("\(count) failed with \(code)")
    }
    return parts.joined(separator: ", ")
  }
}
