import Foundation
import Synchronization
import Testing

@testable import TokenStore

// The in-memory lease keeps sign-outs and back-offs only while a grant can need them, as the
// lease file does (LeaseHistoryTests). Before, it kept every account's sign-out generation and
// every ended back-off for as long as the process lived: a long-lived process with many
// accounts grew without bound. Each test moves the lease's injected wall clock by hand.

@Suite(.timeLimit(.minutes(2))) struct InMemoryLeaseHistoryTests {
  private let user = AccountKey(account: "u1")

  /// Longer than any grant is kept after it lapsed, and than the history the lease keeps.
  private let pastEveryBound = LeaseRecord.historyRetention + 1

  /// A wall clock the test moves.
  private struct TestClock: Sendable {
    let date = Mutex(Date(timeIntervalSinceReferenceDate: 800_000_000))
    var now: @Sendable () -> Date { { [date] in date.withLock { $0 } } }
    func advance(by seconds: TimeInterval) { date.withLock { $0.addTimeInterval(seconds) } }
  }

  /// 10,000 sign-outs of distinct accounts, in batches with the clock moved on after each: past
  /// the year the history is kept for, or past the hour it is kept for once it holds more than
  /// ``InMemoryAuthorizationLease/compactionThreshold`` marks.
  @Test(arguments: [(100, true), (500, false)])
  func thousandsOfSignOutsKeepTheHistoryBounded(batch: Int, pastAYear: Bool) async {
    let clock = TestClock()
    let lease = InMemoryAuthorizationLease(now: clock.now)
    let bound =
      pastAYear ? batch : InMemoryAuthorizationLease.compactionThreshold + batch
    var largest = 0
    for round in 0..<(10_000 / batch) {
      for index in 0..<batch {
        await lease.signOut(account: "account-\(round)-\(index)", by: "app")
      }
      largest = max(largest, lease.history.signOuts + lease.history.holders)
      clock.advance(
        by: pastAYear ? pastEveryBound : LeaseRecord.minimumHistoryRetention + 1)
    }
    #expect(largest <= bound, "the lease kept \(largest) marks")
  }

  @Test func aGrantTakenBeforeAPrunedSignOutStaysNotCurrentAndOneTakenAfterStaysCurrent()
    async throws
  {
    let clock = TestClock()
    let lease = InMemoryAuthorizationLease(now: clock.now)
    // Two keys of one account: one granted before its sign-out, one after.
    let before = try #require(
      await lease.acquire(
        AccountKey(account: "u1", mode: "read"), owner: "A", timeToLive: .seconds(30)
      ).grant)
    await lease.signOut(account: "u1", by: "B")
    let after = try #require(
      await lease.acquire(
        AccountKey(account: "u1", mode: "write"), owner: "A", timeToLive: .seconds(30)
      ).grant)
    #expect(await !lease.isCurrent(before))
    #expect(await lease.isCurrent(after))
    await lease.release(before)

    // Within the year: the later grant lapsed a while ago and was not taken over, so it
    // renews; the sign-out it was taken after is still kept.
    clock.advance(by: LeaseRecord.historyRetention - 1)
    let renewed = try #require(await lease.renew(after, timeToLive: .seconds(30)))
    await lease.signOut(account: "u2", by: "B")
    #expect(lease.history.signOuts == 2)

    clock.advance(by: pastEveryBound)
    await lease.release(renewed)
    // The next change a pruning interval later prunes what is due.
    clock.advance(by: InMemoryAuthorizationLease.pruningInterval)
    await lease.signOut(account: "u3", by: "B")
    #expect(lease.history.signOuts == 1, "the old sign-outs were kept")
    #expect(lease.history.holders == 0)
    #expect(await !lease.isCurrent(before), "a grant older than the pruned sign-out")
    // Taken after u1's sign-out, released, and older than the pruned u2's: not current, as
    // every grant older than the dropped history (no holder can use it any more).
    #expect(await !lease.isCurrent(renewed))
    let next = try #require(
      await lease.acquire(
        AccountKey(account: "u1", mode: "write"), owner: "A", timeToLive: .seconds(30)
      )
      .grant)
    #expect(await lease.isCurrent(next))
  }

  @Test func backOffsThatEndedLeaveNoTrace() async throws {
    let clock = TestClock()
    let lease = InMemoryAuthorizationLease(now: clock.now)
    for index in 0..<200 {
      let grant = try #require(
        await lease.acquire(
          AccountKey(account: "user-\(index)"), owner: "A", timeToLive: .seconds(30)
        ).grant)
      await lease.release(
        grant, backingOff: LeaseBackOff(duration: .seconds(10), failures: 1, code: "network_error"))
    }
    #expect(lease.history.holders == 200)
    clock.advance(by: 11)
    _ = await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    #expect(lease.history.holders == 1)
    #expect(lease.history.signOuts == 0)
  }

  /// A grant that lapsed and was not taken over may still be renewed by its holder: the
  /// sign-outs made after it was taken stay while it may, or else the renewed grant would read
  /// "signed out" for nobody.
  @Test func aLapsedGrantThatMayStillBeRenewedKeepsTheHistoryItNeeds() async throws {
    let clock = TestClock()
    let lease = InMemoryAuthorizationLease(now: clock.now)
    let grant = try #require(
      await lease.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    await lease.signOut(account: "u2", by: "B")
    clock.advance(by: LeaseRecord.historyRetention)
    await lease.signOut(account: "u3", by: "B")
    #expect(lease.history.signOuts == 2, "a sign-out after the grant was dropped")
    let renewed = try #require(await lease.renew(grant, timeToLive: .seconds(30)))
    #expect(await lease.isCurrent(renewed))
    // Once released, the history goes.
    await lease.release(renewed)
    clock.advance(by: pastEveryBound)
    await lease.signOut(account: "u4", by: "B")
    #expect(lease.history.signOuts == 1)
    #expect(lease.history.floor > renewed.generation)
    #expect(await !lease.isCurrent(renewed))
  }

  /// A live grant keeps every sign-out since it was taken, however many and however old: its
  /// account's sign-out keeps it not current, and the others do not end it.
  @Test func aLiveGrantKeepsTheHistoryItNeedsWhenTheHistoryIsLarge() async throws {
    let clock = TestClock()
    let lease = InMemoryAuthorizationLease(now: clock.now)
    let live = try #require(
      await lease.acquire(user, owner: "A", timeToLive: .seconds(10 * 86_400 * 366)).grant)
    let signedOut = try #require(
      await lease.acquire(AccountKey(account: "u2"), owner: "A", timeToLive: .seconds(30)).grant)
    await lease.signOut(account: "u2", by: "B")
    let count = 2 * InMemoryAuthorizationLease.compactionThreshold
    for index in 0..<count {
      await lease.signOut(account: "other-\(index)", by: "B")
    }
    clock.advance(by: pastEveryBound)
    await lease.signOut(account: "last", by: "B")
    #expect(await lease.isCurrent(live))
    #expect(await !lease.isCurrent(signedOut))
    #expect(lease.history.signOuts == count + 2)
    let attempt = await lease.acquire(user, owner: "B", timeToLive: .seconds(30))
    #expect(attempt == .heldElsewhere(owner: "A", expiresAt: live.expiresAt))

    // Once the grant is released (u2's lapsed one went with the hour a large history is kept
    // for), the sign-outs older than the year go.
    await lease.release(live)
    clock.advance(by: InMemoryAuthorizationLease.pruningInterval)
    await lease.signOut(account: "after", by: "B")
    #expect(lease.history.signOuts == 2)
    #expect(lease.history.holders == 0)
    #expect(await !lease.isCurrent(signedOut))
    #expect(await !lease.isCurrent(live), "released, and older than the dropped history")
  }
}

extension LeaseAttempt {
  fileprivate var grant: LeaseGrant? {
    if case .acquired(let grant) = self { grant } else { nil }
  }
}
