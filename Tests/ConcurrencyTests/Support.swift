import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The concurrency suites run one at a time: they load the machine, and the fan-in test times
/// itself.
@Suite(.serialized, .timeLimit(.minutes(10))) enum ConcurrencySuites {}

/// A positive integer from the environment, or `fallback`.
func environmentInt(_ name: String, _ fallback: Int) -> Int {
  guard let text = ProcessInfo.processInfo.environment[name], let value = Int(text), value > 0
  else { return fallback }
  return value
}

/// Waits until no flight is in progress, re-checking on each of `coordinator`'s events.
///
/// A flight counts itself ended before it resumes its waiters, so once every caller returned
/// this returns at once; it stays as a bounded check that nothing is left running. `events`
/// must have been made before the flights ended.
func flightsEnded(_ coordinator: AuthCoordinator, _ events: EventRecorder) async throws {
  try await events.waitUntil { coordinator.statistics.flightsInProgress == 0 }
}

/// Checks the documented balance of the flight counters.
func flightsBalance(_ stats: AuthCoordinator.Statistics) -> Bool {
  stats.flightsStarted
    == stats.flightsSucceeded + stats.flightsFailed + stats.flightsCancelled
    + stats.flightsTimedOut + stats.flightsInProgress
}

/// A model whose token names its key and a number.
func scaleModel(_ mcUid: String, _ number: Int, expiresAt: Date? = nil) -> AuthModel {
  AuthModel(
    uid: "2088" + String(number), accessToken: "tok|\(mcUid)|\(number)", mcUid: mcUid,
    expiresAt: expiresAt)
}

/// Seconds elapsed since `start` on the continuous clock, for printing.
func secondsSince(_ start: ContinuousClock.Instant) -> Double {
  let elapsed = start.duration(to: .now)
  return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

extension AuthCoordinatorError.Code {
  /// An authorizer's own reason, defined outside the core as a module on top of it defines its
  /// codes (the Alipay bridge defines this one, with the same raw value). The core passes an
  /// ``AuthCoordinatorError`` from the authorizer through with its code untouched.
  static let userCancelled = Self(rawValue: "user_cancelled")
}
