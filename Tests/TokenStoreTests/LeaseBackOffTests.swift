import Foundation
import Synchronization
import Testing

@testable import TokenStore

// A back-off through the lease (issue 24, "per fleet, with a lease"): a holder whose
// authorization failed releases its grant with a back-off, and until it ends every owner that
// asks for the key is told to back off instead of being granted it. Both leases of the package,
// each on a clock the test moves by hand: the in-memory lease on an injected wall clock, the
// file lease (two instances on one file: two processes) on an injected host clock.

@Suite(.timeLimit(.minutes(2))) struct LeaseBackOffTests {
  private let user = AccountKey(account: "u1")
  private let backOff = LeaseBackOff(duration: .seconds(3), failures: 2, code: "network_error")

  /// The two kinds under test, as two participants on one lease, and the clock that moves them.
  enum Kind: CaseIterable, Sendable { case inMemory, file }

  struct Participants {
    let a: any AuthorizationLease
    let b: any AuthorizationLease
    let advance: @Sendable (TimeInterval) -> Void
    let now: @Sendable () -> Date
  }

  func participants(_ kind: Kind, in dir: TemporaryDirectory) -> Participants {
    switch kind {
    case .inMemory:
      let date = Mutex(Date(timeIntervalSinceReferenceDate: 800_000_000))
      let now: @Sendable () -> Date = { date.withLock { $0 } }
      let lease = InMemoryAuthorizationLease(now: now)
      return Participants(
        a: lease, b: lease, advance: { seconds in date.withLock { $0.addTimeInterval(seconds) } },
        now: now)
    case .file:
      let host = SteppableHostClock()
      let url = dir.file("tokens.store.lease")
      return Participants(
        a: FileAuthorizationLease(url: url, clock: host.clock),
        b: FileAuthorizationLease(url: url, clock: host.clock),
        advance: { host.advance(by: $0) }, now: { host.wall })
    }
  }

  @Test(arguments: Kind.allCases)
  func aBackOffKeepsEveryOwnerOffTheKeyUntilItEnds(_ kind: Kind) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = participants(kind, in: dir)
    let grant = try #require(
      try await lease.a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    try await lease.a.release(grant, backingOff: backOff)

    lease.advance(1)
    for (participant, owner) in [(lease.b, "B"), (lease.a, "A")] {
      let attempt = try await participant.acquire(user, owner: owner, timeToLive: .seconds(30))
      guard case .backingOff(let until, let failures, let code) = attempt else {
        Issue.record("\(owner) was not told to back off: \(attempt)")
        continue
      }
      #expect(abs(until.timeIntervalSince(lease.now()) - 2) < 0.001, "two seconds left")
      #expect(failures == 2 && code == "network_error")
    }
    // The released grant is no one's: it neither renews nor lifts the back-off.
    #expect(try await lease.a.renew(grant, timeToLive: .seconds(30)) == nil)
    try await lease.a.release(grant)
    try await lease.a.release(grant, backingOff: backOff)
    lease.advance(1.5)
    #expect(try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant == nil)

    // Then the key is granted as usual, with a fence larger than the back-off's.
    lease.advance(0.5)
    let next = try #require(
      try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant,
      "not granted after the back-off")
    #expect(next.fence > grant.fence + 1)
    #expect(next.owner == "B")
  }

  @Test(arguments: Kind.allCases)
  func aBackOffFromAGrantNoLongerHeldChangesNothing(_ kind: Kind) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = participants(kind, in: dir)
    let first = try #require(
      try await lease.a.acquire(user, owner: "A", timeToLive: .seconds(5)).grant)
    lease.advance(6)
    let takeover = try #require(
      try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant)
    // The deposed holder's failure must not keep its successor's key: B still holds it.
    try await lease.a.release(first, backingOff: backOff)
    let attempt = try await lease.a.acquire(user, owner: "A", timeToLive: .seconds(30))
    #expect(attempt == .heldElsewhere(owner: "B", expiresAt: takeover.expiresAt))
    #expect(try await lease.b.renew(takeover, timeToLive: .seconds(30)) != nil)
  }

  @Test(arguments: Kind.allCases)
  func aBackOffIsAnnouncedAsARelease(_ kind: Kind) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = participants(kind, in: dir)
    let grant = try #require(
      try await lease.a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    let changes = lease.a.changes()
    if let file = lease.a as? FileAuthorizationLease { await file.synchronize() }
    try await lease.a.release(grant, backingOff: backOff)
    #expect(await firstChange(changes) == .released(user))
  }

  @Test func theFileKeepsTheBackOffAndRejectsHalfOfOne() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let lease = FileAuthorizationLease(url: url, clock: host.clock)
    let grant = try #require(
      try await lease.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    try await lease.release(grant, backingOff: backOff)
    let text = try String(contentsOf: url, encoding: .utf8)
    #expect(text.contains(#""backOffCode":"network_error""#))
    #expect(text.contains(#""backOffFailures":2"#))
    let record = try LeaseRecord.decode(Data(text.utf8), at: host.clock.now())
    #expect(record.holders[user]?.backOff == .init(failures: 2, code: "network_error"))
    #expect(record.holders[user]?.owner == "")

    let half = text.replacingOccurrences(of: #""backOffFailures":2,"#, with: "")
    #expect(half != text)
    #expect(throws: TokenStoreError.self) {
      try LeaseRecord.decode(Data(half.utf8), at: host.clock.now())
    }
    let negative = text.replacingOccurrences(
      of: #""backOffFailures":2"#, with: #""backOffFailures":-1"#)
    #expect(throws: TokenStoreError.self) {
      try LeaseRecord.decode(Data(negative.utf8), at: host.clock.now())
    }
  }

  /// How a logout (or `invalidate`) ends an account's grants: each also ends its back-offs.
  enum Revocation: CaseIterable, Sendable { case revokeAccount, revokeAll, signOut, signOutAll }

  /// Issue 7: a logout did not end a back-off recorded in the lease, so no process authorized
  /// the account again (a user signing in anew included) until it ran out, up to an hour.
  @Test(arguments: Kind.allCases, Revocation.allCases)
  func aSignOutEndsTheAccountsBackOffs(_ kind: Kind, _ revocation: Revocation) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = participants(kind, in: dir)
    let otherUser = AccountKey(account: "u2")
    let long = LeaseBackOff(duration: .seconds(3600), failures: 3, code: "network_error")
    for key in [user, otherUser] {
      let grant = try #require(
        try await lease.a.acquire(key, owner: "A", timeToLive: .seconds(30)).grant)
      try await lease.a.release(grant, backingOff: long)
    }
    switch revocation {
    case .revokeAccount: try await lease.a.revokeGrants(ofAccount: user.account)
    case .revokeAll: try await lease.a.revokeAllGrants()
    case .signOut: try await lease.a.signOut(account: user.account, by: "A")
    case .signOutAll: try await lease.a.signOutAll(by: "A")
    }
    let attempt = try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30))
    #expect(attempt.grant != nil, "still backing off after \(revocation): \(attempt)")
    let other = try await lease.b.acquire(otherUser, owner: "B", timeToLive: .seconds(30))
    switch revocation {
    case .revokeAccount, .signOut:
      guard case .backingOff = other else {
        Issue.record("another account's back-off ended too: \(other)")
        return
      }
    case .revokeAll, .signOutAll:
      #expect(other.grant != nil, "still backing off after \(revocation): \(other)")
    }
  }

  /// Issue 8: a back-off read from a lease was trusted; `Int.max` failures in the file crashed
  /// every process that adopted it. The failures are clamped to
  /// ``LeaseBackOff/maximumFailures`` and the back-off's end to ``LeaseBackOff/maximumDuration``
  /// from now, on the lease's clock.
  @Test func anAbsurdBackOffInTheFileIsClamped() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let now = host.clock.now()
    let year: TimeInterval = 365 * 86_400
    let bootNow = try #require(now.boot)
    let record =
      #"{"floor":0,"format":"authcoordinator.lease","generation":0,"holders":[{"#
      + #""backOffCode":"network_error","backOffFailures":\#(Int.max),"boot":"\#(bootNow.boot)","#
      + #""bootExpiresAt":\#(bootNow.advanced(bySeconds: year).nanoseconds),"#
      + #""expiresAt":\#(now.wall.addingTimeInterval(year).timeIntervalSinceReferenceDate),"#
      + #""fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":""}],"#
      + #""nextFence":2,"userSignedOut":[],"version":1}"#
    try Data(record.utf8).writePrivately(to: url)
    let issues = IssueLog()
    let lease = FileAuthorizationLease(url: url, clock: host.clock, onIssue: issues.handler)
    let attempt = try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    guard case .backingOff(let until, let failures, let code) = attempt else {
      Issue.record("the back-off in the file was not kept: \(attempt)")
      return
    }
    #expect(failures == LeaseBackOff.maximumFailures)
    #expect(code == "network_error")
    #expect(until.timeIntervalSince(host.wall) <= LeaseBackOff.maximumDuration.seconds)
    #expect(issues.codes.isEmpty)
    // It ends within the hour.
    host.advance(by: LeaseBackOff.maximumDuration.seconds + 0.001)
    #expect(try await lease.acquire(user, owner: "A", timeToLive: .seconds(30)).grant != nil)
  }

  /// What a lease records of `release(_:backingOff:)` is clamped as what it reads is.
  @Test(arguments: Kind.allCases)
  func anAbsurdBackOffReleasedIsClamped(_ kind: Kind) async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = participants(kind, in: dir)
    let grant = try #require(
      try await lease.a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    try await lease.a.release(
      grant,
      backingOff: LeaseBackOff(duration: .seconds(Int64.max), failures: .max, code: "network_error")
    )
    let attempt = try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30))
    guard case .backingOff(let until, let failures, _) = attempt else {
      Issue.record("no back-off: \(attempt)")
      return
    }
    #expect(failures == LeaseBackOff.maximumFailures)
    #expect(until.timeIntervalSince(lease.now()) <= LeaseBackOff.maximumDuration.seconds)
    lease.advance(LeaseBackOff.maximumDuration.seconds + 0.001)
    #expect(try await lease.b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant != nil)
  }

  /// The first change of `stream`, or `nil` when 10 seconds pass first (a failure).
  private func firstChange(_ stream: AsyncStream<LeaseChange>) async -> LeaseChange? {
    await withTaskGroup(of: LeaseChange?.self) { group in
      group.addTask {
        for await change in stream { return change }
        return nil
      }
      group.addTask {
        // A bound, never a pass: a missed announcement fails the test after 10 s.
        try? await ContinuousClock().sleep(for: .seconds(10))
        return nil
      }
      let first = await group.next() ?? nil
      group.cancelAll()
      return first
    }
  }
}

extension LeaseAttempt {
  fileprivate var grant: LeaseGrant? {
    if case .acquired(let grant) = self { grant } else { nil }
  }
}
