import Foundation

/// The token server's outages: for a stretch of virtual time every token request fails (503 with
/// `Retry-After`, or dropped). A flight's retries then run out, its failure is remembered and
/// the lease records the back-off (rules 26 and 29): what a logout during a back-off, and the
/// fleet's one request per back-off step, need to happen.
final class FleetOutage: @unchecked Sendable {
  private let lock = NSLock()
  private var until: Duration = .zero

  /// The server is down from `now` for `length` (a later end wins).
  func begin(at now: Duration, for length: Duration) {
    lock.withLock { until = max(until, now + length) }
  }

  /// Whether the server is down at `now`.
  func isDown(at now: Duration) -> Bool { lock.withLock { now < until } }
}
