import AuthCoordinatorOAuth2
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// How one call ended: an HTTP status, or the code of the error it threw. Never a token.
enum Outcome: Hashable, Sendable, Comparable, CustomStringConvertible {
  case status(Int)
  case error(String)

  init(_ error: any Error) {
    switch error {
    case let error as AuthCoordinatorError: self = .error(error.code.rawValue)
    case let error as URLError: self = .error("URLError \(error.code.rawValue)")
    default: self = .error("\(type(of: error))")
    }
  }

  var description: String {
    switch self {
    case .status(let status): return "\(status)"
    case .error(let code): return code
    }
  }
}

/// The calls of one wave, all started together.
struct Wave: Sendable {
  /// Each call's outcome and how long it took, in seconds.
  let calls: [(outcome: Outcome, seconds: Double)]
  /// From the first call's start to the last call's end, in seconds.
  let seconds: Double

  /// How many calls ended with `outcome`.
  func count(_ outcome: Outcome) -> Int { calls.filter { $0.outcome == outcome }.count }
  /// Whether every call ended with `outcome`.
  func all(_ outcome: Outcome) -> Bool { calls.allSatisfy { $0.outcome == outcome } }
  /// The longest call, in seconds.
  var longest: Double { calls.map(\.seconds).max() ?? 0 }
  /// The shortest call, in seconds.
  var shortest: Double { calls.map(\.seconds).min() ?? 0 }

  /// `2000 × 200`, or `150 × timed_out, 50 × 200`: each outcome with its count.
  var tally: String {
    let counts = Dictionary(grouping: calls, by: \.outcome).mapValues(\.count)
    return counts.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }
      .joined(separator: ", ")
  }
}

/// Runs `count` calls of `call` at once, each in its own task, and waits for all of them.
///
/// - Parameters:
///   - count: How many calls.
///   - call: One call; returns its HTTP status.
///   - afterStatus: Runs in the call's task once it has its status (the revocation trigger of
///     the storm); what it throws becomes the call's outcome.
func wave(
  _ count: Int,
  of call: @escaping @Sendable () async throws -> Int,
  afterStatus: @escaping @Sendable (Int) async throws -> Void = { _ in }
) async -> Wave {
  let clock = ContinuousClock()
  let start = clock.now
  let calls = await withTaskGroup(of: (outcome: Outcome, seconds: Double).self) { group in
    for _ in 0..<count {
      group.addTask {
        let begin = clock.now
        let outcome: Outcome
        do {
          let status = try await call()
          try await afterStatus(status)
          outcome = .status(status)
        } catch {
          outcome = Outcome(error)
        }
        return (outcome, (clock.now - begin).inSeconds)
      }
    }
    var calls: [(outcome: Outcome, seconds: Double)] = []
    calls.reserveCapacity(count)
    for await result in group { calls.append(result) }
    return calls
  }
  return Wave(calls: calls, seconds: (clock.now - start).inSeconds)
}

/// A counter shared by the calls of a wave.
final class SharedCounter: @unchecked Sendable {
  private let lock = NSLock()
  private var value = 0

  /// Adds one and returns the new value.
  func increment() -> Int {
    lock.lock()
    defer { lock.unlock() }
    value += 1
    return value
  }
}

/// The loop guard's back-offs, as the coordinator's event stream reports them.
final class BackoffLog: @unchecked Sendable {
  private let lock = NSLock()
  private var delays: [Duration] = []

  /// Starts recording `coordinator`'s back-offs; returns once subscribed.
  init(_ coordinator: AuthCoordinator) {
    let events = coordinator.events
    Task { [self] in
      for await event in events {
        if case .refreshLoopBackedOff(_, let delay) = event { record(delay) }
      }
    }
  }

  private func record(_ delay: Duration) {
    lock.lock()
    defer { lock.unlock() }
    delays.append(delay)
  }

  /// The delays recorded so far, oldest first.
  var recorded: [Duration] {
    lock.lock()
    defer { lock.unlock() }
    return delays
  }
}

extension Duration {
  /// The duration in seconds, as a `Double`.
  var inSeconds: Double {
    Double(components.seconds) + Double(components.attoseconds) / 1e18
  }
}

/// `1.23 s`.
func seconds(_ value: Double) -> String { String(format: "%.2f s", value) }
