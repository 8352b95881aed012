import AuthCoordinator
import AuthCoordinatorOAuth2
import Foundation

/// One request the simulated service handles: a real ``BearerClient`` call to the simulated
/// API. The client asks the real coordinator for the shared token, attaches it, and on a 401
/// asks for a forced refresh of exactly the token that was rejected (so that concurrent
/// rejections of the same token share one refresh) and retries once; a second 401 is the
/// call's answer.
struct ServiceRequest: Sendable {
  /// How one request ended.
  enum Outcome: Sendable {
    /// 200 OK.
    case ok
    /// The call threw (its error code), or the API's last answer was not 200.
    case failed(String)
  }

  /// The API's endpoint the service calls.
  static let reports = URL(string: "https://api.simulated.example/reports")!

  let client: BearerClient

  func run() async -> Outcome {
    do {
      let (_, response) = try await client.data(from: Self.reports)
      return response.statusCode == 200 ? .ok : .failed("HTTP \(response.statusCode)")
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
  var failures: [String: Int] = [:]

  var failed: Int { failures.values.reduce(0, +) }

  mutating func add(_ outcome: ServiceRequest.Outcome) {
    switch outcome {
    case .ok: served += 1
    case .failed(let code): failures[code, default: 0] += 1
    }
  }

  mutating func add(_ other: ServiceTally) {
    served += other.served
    failures.merge(other.failures, uniquingKeysWith: +)
  }

  func count(_ code: AuthCoordinatorError.Code) -> Int { failures[code.rawValue] ?? 0 }

  /// `2000 served`, `1990 served, 10 failed with timed_out`.
  var text: String {
    var parts = ["\(served) served"]
    for (code, count) in failures.sorted(by: { $0.key < $1.key }) {
      parts.append("\(count) failed with \(code)")
    }
    return parts.joined(separator: ", ")
  }
}
