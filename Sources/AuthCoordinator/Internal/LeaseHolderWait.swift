import Foundation

/// How long a flight waits for another process's lease holder before it tries the lease again
/// (a release or sign-out announced meanwhile ends the wait sooner).
///
/// Until the holder's expiry, as the lease reported it, plus a millisecond. The expiry is a
/// date on the lease's clock, the wait runs on this process's: when the two disagree (a wall
/// clock stepped in this process, or a lease that keeps expiries on a clock that never steps),
/// the raw difference can be negative or far too long. So:
/// - an expiry already past by this process's clock, while the lease still says "held", waits a
///   tenth of the time to live (at most a second) instead of retrying at once, in a loop;
/// - an expiry more than one time to live ahead waits one time to live: a live holder renews by
///   then anyway, and the next attempt sees the lease as it is.
enum LeaseHolderWait {
  static func duration(holderExpiresAt expiry: Date, now: Date, timeToLive: Duration) -> Duration {
    let timeToLive = max(timeToLive, .milliseconds(1))
    let lapse = Duration.saturating(seconds: expiry.timeIntervalSince(now))
    guard lapse > .zero else { return min(timeToLive / 10, .seconds(1)) + .milliseconds(1) }
    return min(lapse, timeToLive) + .milliseconds(1)
  }
}
