import Foundation
import Testing

@testable import TokenStore

/// A process's in-memory lease with a store that outlives the process (a file): the fences the
/// store keeps (the last fenced save per key, and a logout's revoked fence) come from the
/// previous run's lease, so the next run's lease must number its grants above them, or its
/// holders' saves are refused until it has issued as many grants again.
@Suite(.timeLimit(.minutes(5))) struct LeaseRestartFenceTests {
  @Test func aRestartedInMemoryLeaseGrantsAboveTheFencesAFileStoreKept() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let url = directory.file("tokens.store")
    let clock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))

    // The first run: a few grants, a save under each, then u1 signs out.
    do {
      let lease = InMemoryAuthorizationLease(now: clock.now)
      let store = FileTokenStore(url: url)
      for n in 1...3 {
        let grant = try #require(
          granted(await lease.acquire(key(n), owner: "A", timeToLive: .seconds(60))))
        #expect(try await store.save(sampleModel(n), for: key(n), fence: grant.fence))
        await lease.release(grant)
      }
      let revoked = try #require(await lease.revokeGrantsReportingFence(ofAccount: "u1"))
      try await store.removeModels(forAccount: "u1", refusingFencesThrough: revoked)
    }

    // The next run, a second later: a new lease, the same file.
    clock.advance(by: 1)
    let lease = InMemoryAuthorizationLease(now: clock.now)
    let store = FileTokenStore(url: url)
    // u1 signs in again: the save under the new run's grant lands.
    let signIn = try #require(
      granted(await lease.acquire(key(1), owner: "A", timeToLive: .seconds(60))))
    #expect(try await store.save(sampleModel(4), for: key(1), fence: signIn.fence))
    // u3's refresh replaces the model the first run saved under its last grant.
    let refresh = try #require(
      granted(await lease.acquire(key(3), owner: "A", timeToLive: .seconds(60))))
    let renewed = sampleModel(5)
    #expect(try await store.save(renewed, for: key(3), fence: refresh.fence))
    #expect(try await store.model(for: key(3)) == renewed)
  }

  /// A lease that issued no grant yet reports, from a revocation, the fence just below its
  /// first: a mark every grant it issues later is above (as its documentation says).
  @Test func aFreshLeaseRevocationMarksBelowItsFirstGrant() async throws {
    let clock = ManualWallClock(Date(timeIntervalSince1970: 1_800_000_000))
    let lease = InMemoryAuthorizationLease(now: clock.now)
    let mark = try #require(await lease.revokeGrantsReportingFence(ofAccount: "u1"))
    let all = try #require(await lease.revokeAllGrantsReportingFence())
    #expect(mark == all)
    #expect(mark == LeaseRecord.firstFence(at: clock.now()) - 1)
    let grant = try #require(
      granted(await lease.acquire(key(1), owner: "A", timeToLive: .seconds(60))))
    #expect(grant.fence == mark + 1)
  }

  private func granted(_ attempt: LeaseAttempt) -> LeaseGrant? {
    if case .acquired(let grant) = attempt { return grant }
    return nil
  }
}

/// A wall clock a test moves by hand.
private final class ManualWallClock: @unchecked Sendable {
  private let lock = NSLock()
  private var date: Date

  init(_ date: Date) { self.date = date }

  var now: @Sendable () -> Date { { [self] in lock.withLock { date } } }

  func advance(by seconds: TimeInterval) { lock.withLock { date += seconds } }
}
