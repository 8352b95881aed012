import Foundation
import Synchronization
import Testing

@testable import TokenStore

// Expiries on one host never depend on the wall clock (the faults issue): two
// `FileAuthorizationLease` objects on one file (two processes) read one injected host clock whose
// wall clock the test steps by an hour while the boot clock runs on. Before, expiries were
// wall-clock dates: a forward step let the second process take a live grant over at once, and a
// backward step kept a dead holder's grant for an hour more.

@Suite(.timeLimit(.minutes(5))) struct LeaseClockStepTests {
  private let user = AccountKey(account: "u1")

  @Test(arguments: [3600.0, -3600.0])
  func aWallClockStepNeitherHastensNorDelaysATakeover(_ step: TimeInterval) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let a = FileAuthorizationLease(url: dir.file("tokens.store.lease"), clock: host.clock)
    let b = FileAuthorizationLease(url: dir.file("tokens.store.lease"), clock: host.clock)
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    #expect(grant.expiresAt == host.wall.addingTimeInterval(30))

    host.stepWall(by: step)
    host.advance(by: 29)
    // One second left, on the boot clock; the date says so on the stepped wall clock.
    let attempt = try await b.acquire(user, owner: "B", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, let until) = attempt else {
      Issue.record("the live grant was taken over after a wall-clock step of \(step) s: \(attempt)")
      return
    }
    #expect(owner == "A")
    #expect(abs(until.timeIntervalSince(host.wall) - 1) < 0.001)

    // A dies (renews no more): taken over 30 s after its grant, on the boot clock.
    host.advance(by: 1.001)
    let takeover = try #require(
      try await b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant,
      "a dead holder's grant was not taken over on time after a step of \(step) s")
    #expect(takeover.fence > grant.fence)
    #expect(try await a.renew(grant, timeToLive: .seconds(30)) == nil)
  }

  @Test func aHolderThatRenewsKeepsItsGrantAcrossStepsBothWays() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let a = FileAuthorizationLease(url: dir.file("tokens.store.lease"), clock: host.clock)
    let b = FileAuthorizationLease(url: dir.file("tokens.store.lease"), clock: host.clock)
    var grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(3)).grant)
    // Each step lands between a renewal and the other process's attempt.
    for step in [3600.0, -7200, 3600, 86_400] {
      host.advance(by: 1)
      grant = try #require(try await a.renew(grant, timeToLive: .seconds(3)))
      host.stepWall(by: step)
      host.advance(by: 1)
      let attempt = try await b.acquire(user, owner: "B", timeToLive: .seconds(3))
      #expect(attempt.grant == nil, "taken over after a step of \(step) s: \(attempt)")
    }
  }

  @Test func aHolderOfAnEarlierBootHasExpired() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.file("tokens.store.lease")
    let before = SteppableHostClock(boot: "boot-before", nanoseconds: 900_000_000_000_000)
    let after = SteppableHostClock(boot: "boot-after", nanoseconds: 5_000_000_000)
    let old = FileAuthorizationLease(url: url, clock: before.clock)
    let grant = try #require(
      try await old.acquire(user, owner: "A", timeToLive: .seconds(3600)).grant)
    // After the reboot, the wall clock (and the boot clock's count) say nothing of the old
    // grant: it is not trusted, whatever its expiry reads.
    let issues = IssueLog()
    let new = FileAuthorizationLease(url: url, clock: after.clock, onIssue: issues.handler)
    let takeover = try #require(
      try await new.acquire(user, owner: "B", timeToLive: .seconds(30)).grant)
    #expect(takeover.fence > grant.fence)
    #expect(issues.codes.isEmpty)
  }

  @Test func aRecordOfAnEarlierVersionIsComparedOnTheWallClock() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.file("tokens.store.lease")
    let host = SteppableHostClock()
    let expiry = host.wall.addingTimeInterval(60).timeIntervalSinceReferenceDate
    // Version 1 as earlier versions wrote it: a wall-clock expiry only.
    let record =
      #"{"floor":0,"format":"authcoordinator.lease","generation":0,"holders":[{"expiresAt":"#
      + "\(expiry)"
      + #","fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"older"}],"#
      + #""nextFence":2,"userSignedOut":[],"version":1}"#
    try Data(record.utf8).write(to: url)
    let issues = IssueLog()
    let lease = FileAuthorizationLease(url: url, clock: host.clock, onIssue: issues.handler)
    let attempt = try await lease.acquire(user, owner: "B", timeToLive: .seconds(30))
    #expect(
      attempt
        == .heldElsewhere(owner: "older", expiresAt: Date(timeIntervalSinceReferenceDate: expiry)))
    host.advance(by: 61)
    #expect(try await lease.acquire(user, owner: "B", timeToLive: .seconds(30)).grant != nil)
    #expect(issues.codes.isEmpty)
    // The new holder carries both expiries, so an earlier version still reads it.
    let text = String(decoding: try Data(contentsOf: url), as: UTF8.self)
    #expect(text.contains(#""boot":"boot-test""#) && text.contains(#""bootExpiresAt":"#))
    #expect(text.contains(#""expiresAt":"#))
  }

  @Test func theBootClockExpiryRoundTripsAndIsValidated() throws {
    let time = HostTime(
      wall: Date(timeIntervalSinceReferenceDate: 800_000_000),
      boot: BootInstant(boot: "b1", nanoseconds: 7_000_000_000))
    var record = LeaseRecord()
    record.nextFence = 2
    record.holders[user] = LeaseRecord.Holder.lasting(30, owner: "A", fence: 1, from: time)
    #expect(
      record.holders[user]?.bootExpiry == BootInstant(boot: "b1", nanoseconds: 37_000_000_000))
    #expect(try LeaseRecord.decode(record.encoded(), at: time) == record)

    func holder(_ fields: String) -> Data {
      Data(
        (#"{"floor":0,"format":"authcoordinator.lease","generation":0,"holders":[{"#
          + fields
          + #","expiresAt":800000030,"fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"#
          + #""owner":"A"}],"nextFence":2,"userSignedOut":[],"version":1}"#).utf8)
    }
    let corrupt = [
      #""boot":"b1""#,  // half a boot-clock expiry
      #""bootExpiresAt":37000000000"#,
      #""boot":"","bootExpiresAt":37000000000"#,
      #""boot":"b1","bootExpiresAt":-1"#,
      #""boot":"b1","bootExpiresAt":1e300"#,
      #""boot":"b1","bootExpiresAt":37000000000.5"#,
      // Of this boot and more than ten years ahead of it: no process took that grant.
      #""boot":"b1","bootExpiresAt":18446744073709551615"#,
      #""boot":"\#(String(repeating: "x", count: 129))","bootExpiresAt":1"#,
    ]
    for fields in corrupt {
      #expect(throws: TokenStoreError(.corruptFile, ""), "\(fields)") {
        try LeaseRecord.decode(holder(fields), at: time)
      }
    }
    // Of another boot, any count is an expired holder, not a corrupt record.
    let other = try LeaseRecord.decode(
      holder(#""boot":"b0","bootExpiresAt":18446744073709551615"#), at: time)
    #expect(other.holders[user]?.isLive(at: time) == false)
    #expect(other.holders[user]?.expiry(at: time) == time.wall)
  }
}

/// A host clock for tests: the wall clock and the boot clock advance together, and the wall
/// clock can also be stepped on its own, as setting the clock (or NTP) would.
final class SteppableHostClock: Sendable {
  private let state: Mutex<(wall: Date, nanoseconds: UInt64)>
  let boot: String

  init(boot: String = "boot-test", nanoseconds: UInt64 = 1_000_000_000_000) {
    self.boot = boot
    state = Mutex((Date(timeIntervalSinceReferenceDate: 800_000_000), nanoseconds))
  }

  var wall: Date { state.withLock { $0.wall } }

  var clock: HostClock {
    HostClock(
      wall: { [state] in state.withLock { $0.wall } },
      boot: { [state, boot] in
        BootInstant(boot: boot, nanoseconds: state.withLock { $0.nanoseconds })
      })
  }

  func advance(by seconds: TimeInterval) {
    state.withLock {
      $0.wall.addTimeInterval(seconds)
      $0.nanoseconds += UInt64(seconds * 1e9)
    }
  }

  func stepWall(by seconds: TimeInterval) { state.withLock { $0.wall.addTimeInterval(seconds) } }
}

extension LeaseAttempt {
  fileprivate var grant: LeaseGrant? {
    if case .acquired(let grant) = self { grant } else { nil }
  }
}
