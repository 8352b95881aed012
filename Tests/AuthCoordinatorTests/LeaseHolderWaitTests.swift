import Foundation
import Testing

@testable import AuthCoordinator

/// How long a flight waits for another process's holder, decided without tasks. Before, an
/// expiry already past by this process's clock (its wall clock stepped forward, the holder alive
/// on the lease's clock) gave a wait of one millisecond, and the waiter tried the lease again a
/// thousand times a second until the holder released it.
@Suite(.timeLimit(.minutes(2))) struct LeaseHolderWaitTests {
  let now = Date(timeIntervalSince1970: 1_800_000_000)
  let ttl = Duration.milliseconds(600)

  @Test func waitsUntilTheHoldersExpiry() {
    let wait = LeaseHolderWait.duration(
      holderExpiresAt: now.addingTimeInterval(0.25), now: now, timeToLive: ttl)
    #expect(wait == .milliseconds(251))
  }

  @Test func anExpiryAlreadyPastWaitsATenthOfTheTimeToLiveNotAMillisecond() {
    for step in [0.0, -0.001, -1, -3600] {
      let wait = LeaseHolderWait.duration(
        holderExpiresAt: now.addingTimeInterval(step), now: now, timeToLive: ttl)
      #expect(wait == .milliseconds(61), "expiry \(step) s from now")
    }
    let long = LeaseHolderWait.duration(
      holderExpiresAt: now.addingTimeInterval(-5), now: now, timeToLive: .seconds(30))
    #expect(long == .milliseconds(1001), "at most a second")
  }

  @Test func anExpiryFarAheadWaitsOneTimeToLive() {
    let wait = LeaseHolderWait.duration(
      holderExpiresAt: now.addingTimeInterval(3600), now: now, timeToLive: ttl)
    #expect(wait == .milliseconds(601))
  }

  @Test func absurdExpiriesNeverTrap() {
    for expiry in [Date.distantPast, .distantFuture, Date(timeIntervalSince1970: 1e300)] {
      let wait = LeaseHolderWait.duration(holderExpiresAt: expiry, now: now, timeToLive: ttl)
      #expect(wait > .zero && wait <= .milliseconds(601))
    }
  }
}
