import Foundation
import Testing

@testable import TokenStore

// The lease file keeps sign-outs and back-offs only while a grant can need them (issue item 5).
// Before, every sign-out (about 180 bytes an account) and every back-off (about 270 bytes a
// key) stayed forever; past 1 MiB the file was unreadable and replaced by an empty record, so a
// live grant read "signed out" and the key could be granted a second time. Two
// `FileAuthorizationLease` objects on one file (two processes) read one host clock the test
// moves by hand.

@Suite(.timeLimit(.minutes(5))) struct LeaseHistoryTests {
  private let user = AccountKey(account: "u1")

  /// Longer than any grant's time to live, and than the history the lease keeps.
  private let pastEveryBound = LeaseRecord.maximumTimeToLive + 1

  @Test func thousandsOfSignOutsKeepTheFileSmall() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let lease = FileAuthorizationLease(url: url, clock: host.clock)
    let limit = 64 * 1024
    var largest = 0
    let batches = 30
    let batch = 100
    for round in 0..<batches {
      for index in 0..<batch {
        try await lease.signOut(account: "account-\(round)-\(index)", by: "app")
      }
      largest = max(largest, try Data(contentsOf: url).count)
      guard largest < limit else {
        Issue.record(
          "the lease file reached \(largest) bytes after \((round + 1) * batch) sign-outs")
        return
      }
      host.advance(by: pastEveryBound)
    }
    // Bounded size is what keeps each operation fast (it reads, decodes, encodes and replaces
    // the whole file: near 1 MiB it took 108-184 ms); no wall-clock assertion, which a busy
    // machine would make flaky. On 4ba0ba1 the file passed 64 KiB after 1,000 sign-outs.
    #expect(largest < limit)
  }

  @Test func aGrantTakenBeforeAPrunedSignOutStaysNotCurrentAndOneTakenAfterStaysCurrent()
    async throws
  {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let a = FileAuthorizationLease(url: url, clock: host.clock)
    let b = FileAuthorizationLease(url: url, clock: host.clock)
    // Two keys of one account: one granted before its sign-out, one after.
    let before = try #require(
      try await a.acquire(
        AccountKey(account: "u1", mode: "read"), owner: "A", timeToLive: .seconds(30)
      ).grant)
    try await b.signOut(account: "u1", by: "B")
    let after = try #require(
      try await a.acquire(
        AccountKey(account: "u1", mode: "write"), owner: "A", timeToLive: .seconds(Int64.max)
      ).grant)
    #expect(try await !a.isCurrent(before))
    #expect(try await a.isCurrent(after))
    try await a.release(before)

    host.advance(by: pastEveryBound)
    // The later grant lapsed a moment ago and was not taken over: it renews.
    let renewed = try #require(try await a.renew(after, timeToLive: .seconds(30)))
    try await b.signOut(account: "u2", by: "B")  // any change prunes what is due
    let record = try LeaseRecord.decode(Data(contentsOf: url), at: host.clock.now())
    #expect(record.userSignedOut["u1"] == nil, "the old sign-out was kept")
    for lease in [a, b] {
      #expect(try await !lease.isCurrent(before), "a grant older than the pruned sign-out")
      #expect(try await lease.isCurrent(after))
      #expect(try await lease.isCurrent(renewed))
    }
  }

  @Test func backOffsThatEndedLeaveNoTrace() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let lease = FileAuthorizationLease(url: url, clock: host.clock)
    for index in 0..<200 {
      let grant = try #require(
        try await lease.acquire(
          AccountKey(account: "user-\(index)"), owner: "A", timeToLive: .seconds(30)
        ).grant)
      try await lease.release(
        grant, backingOff: LeaseBackOff(duration: .seconds(10), failures: 1, code: "network_error"))
    }
    host.advance(by: 11)
    _ = try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    let record = try LeaseRecord.decode(Data(contentsOf: url), at: host.clock.now())
    #expect(record.holders.values.allSatisfy { $0.backOff == nil })
    #expect(record.holders.count == 1)
    #expect(try Data(contentsOf: url).count < 1024, "one holder is a few hundred bytes")
  }

  /// The old path: past 1 MiB the file was replaced by an empty record, so a refresh in flight
  /// ended `signed_out` for a user nobody signed out and the next process spent the refresh
  /// token again. Now a change that would make the file too large is refused, and the live
  /// grant stays current and held.
  @Test func aFileThatWouldGrowPastItsLimitNeverEndsALiveGrant() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let issues = IssueLog()
    let a = FileAuthorizationLease(url: url, clock: host.clock, onIssue: issues.handler)
    let b = FileAuthorizationLease(url: url, clock: host.clock, onIssue: issues.handler)
    let grant = try #require(
      try await a.acquire(user, owner: "A", timeToLive: .seconds(3600)).grant)
    // Sign-outs of other accounts with long names fill the file quickly.
    let name = String(repeating: "x", count: 60 * 1024)
    var refused: TokenStoreError?
    for index in 0..<(2 * LeaseRecord.maximumSize / name.utf8.count) {
      do {
        try await b.signOut(account: "\(name)-\(index)", by: "B")
      } catch {
        refused = error
        break
      }
    }
    #expect(refused?.code == .fileTooLarge, "no change was refused: \(String(describing: refused))")
    #expect(try await a.isCurrent(grant), "the live grant reads signed out")
    #expect(try await b.isCurrent(grant))
    let attempt = try await b.acquire(user, owner: "B", timeToLive: .seconds(30))
    #expect(attempt == .heldElsewhere(owner: "A", expiresAt: grant.expiresAt))
    #expect(issues.codes.isEmpty, "\(issues.all)")
    #expect(try Data(contentsOf: url).count <= LeaseRecord.maximumSize)

    // Once the grant is released and the sign-outs are old, they are dropped.
    try await a.release(grant)
    host.advance(by: pastEveryBound)
    try await b.signOut(account: "u2", by: "B")
    #expect(try Data(contentsOf: url).count < 4096)
    #expect(try await !a.isCurrent(grant))
  }

  /// A grant that lapsed and was not taken over may still be renewed by its holder: the
  /// sign-outs made after it was taken stay while it is in the record, or else the renewed
  /// grant would read "signed out" for nobody.
  @Test func aLapsedGrantThatMayStillBeRenewedKeepsTheHistoryItNeeds() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let a = FileAuthorizationLease(url: url, clock: host.clock)
    let b = FileAuthorizationLease(url: url, clock: host.clock)
    let grant = try #require(
      try await a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    try await b.signOut(account: "u2", by: "B")
    host.advance(by: LeaseRecord.historyRetention + 1)
    try await b.signOut(account: "u3", by: "B")
    let record = try LeaseRecord.decode(Data(contentsOf: url), at: host.clock.now())
    #expect(record.userSignedOut["u2"] != nil, "a sign-out after the grant was dropped")
    let renewed = try #require(try await a.renew(grant, timeToLive: .seconds(30)))
    #expect(try await b.isCurrent(renewed))
    // Once released, the history goes.
    try await a.release(renewed)
    host.advance(by: LeaseRecord.historyRetention + 1)
    try await b.signOut(account: "u4", by: "B")
    let after = try LeaseRecord.decode(Data(contentsOf: url), at: host.clock.now())
    #expect(after.userSignedOut.keys.sorted() == ["u4"])
    #expect(try await !b.isCurrent(renewed))
  }

  /// A file an earlier version let grow past 1 MiB (it recorded no times and no grant
  /// generations) is read, not replaced by an empty record: its live grant stays current and
  /// held. Its history goes once the grant is gone and the file is still too large.
  @Test func aFileOfAnEarlierVersionPastTheLimitKeepsItsLiveGrant() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let host = SteppableHostClock()
    let url = dir.file("tokens.store.lease")
    let now = host.clock.now()
    let bootNow = try #require(now.boot)
    let name = String(repeating: "y", count: 1000)
    let count = LeaseRecord.maximumSize / 1000 + 50
    let marks = (0..<count).map {
      #"{"by":"old","generation":\#($0 + 1),"mcUid":"\#(name)\#($0)"}"#
    }
    let text =
      #"{"floor":0,"format":"authcoordinator.lease","generation":\#(count),"holders":[{"#
      + #""boot":"\#(bootNow.boot)","bootExpiresAt":\#(bootNow.advanced(bySeconds: 60).nanoseconds),"#
      + #""expiresAt":\#(now.wall.addingTimeInterval(60).timeIntervalSinceReferenceDate),"#
      + #""fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"older"}],"#
      + #""nextFence":2,"userSignedOut":[\#(marks.joined(separator: ","))],"version":1}"#
    try Data(text.utf8).writePrivately(to: url)
    try #require(text.utf8.count > LeaseRecord.maximumSize)
    // The grant the earlier version handed out: taken after every sign-out in the file.
    let grant = LeaseGrant(
      key: user, owner: "older", fence: 1, generation: UInt64(count),
      expiresAt: now.wall.addingTimeInterval(60))
    let issues = IssueLog()
    let lease = FileAuthorizationLease(url: url, clock: host.clock, onIssue: issues.handler)
    #expect(try await lease.isCurrent(grant))
    let attempt = try await lease.acquire(user, owner: "B", timeToLive: .seconds(30))
    #expect(attempt == .heldElsewhere(owner: "older", expiresAt: grant.expiresAt))
    #expect(issues.codes.isEmpty, "\(issues.all)")

    // Once the grant lapsed and could no longer be renewed, the old history goes.
    host.advance(by: LeaseRecord.minimumHistoryRetention + 61)
    try await lease.signOut(account: "u2", by: "B")
    let record = try LeaseRecord.decode(Data(contentsOf: url), at: host.clock.now())
    #expect(record.userSignedOut.keys.sorted() == ["u2"])
    #expect(record.historyFloor == UInt64(count))
    #expect(try await lease.isCurrent(grant), "no sign-out of its account since it was taken")
    #expect(issues.codes.isEmpty, "\(issues.all)")
  }

  @Test func theHistoryRoundTripsAndIsValidated() throws {
    let time = HostTime(
      wall: Date(timeIntervalSinceReferenceDate: 800_000_000),
      boot: BootInstant(boot: "b1", nanoseconds: 7_000_000_000))
    var record = LeaseRecord()
    record.nextFence = 3
    record.generation = 5
    record.historyFloor = 2
    record.userSignedOut["u2"] = LeaseRecord.SignOut(generation: 4, by: "app", at: time)
    record.userRevoked["u3"] = LeaseRecord.Revocation(generation: 5, at: time)
    record.holders[user] = LeaseRecord.Holder.lasting(
      30, owner: "A", fence: 2, generation: 3, from: time)
    let decoded = try LeaseRecord.decodeClamping(record.encoded(), at: time)
    #expect(decoded.record == record && !decoded.clamped)
    let text = String(decoding: try record.encoded(), as: UTF8.self)

    func variant(_ from: String, _ to: String) -> Data {
      #expect(text.contains(from), "\(from)")
      return Data(text.replacingOccurrences(of: from, with: to).utf8)
    }
    let corrupt = [
      variant(#""historyFloor":2"#, #""historyFloor":6"#),  // above the generation
      variant(#""generation":3,"key""#, #""generation":6,"key""#),  // a holder's, likewise
      variant(#""bootAt":7000000000,"by""#, #""by""#),  // half a boot-clock time
      variant(#""at":800000000,"boot":"b1","bootAt":7000000000,"by""#, #""at":1e300,"by""#),
    ]
    for data in corrupt {
      #expect(throws: TokenStoreError(.corruptFile, "")) {
        try LeaseRecord.decode(data, at: time)
      }
    }
    // A time ahead of the reader's clocks is clamped to them, and written back.
    let ahead = try LeaseRecord.decodeClamping(
      variant(#""bootAt":7000000000,"by""#, #""bootAt":9000000000,"by""#), at: time)
    #expect(ahead.clamped)
    #expect(ahead.record.userSignedOut["u2"]?.at == time)
  }

  @Test func droppedHistoryIsNeverAnnouncedAsASignOutButAsUnknownWhenUnseen() {
    let time = HostTime(wall: Date(timeIntervalSinceReferenceDate: 800_000_000), boot: nil)
    var old = LeaseRecord()
    old.generation = 2
    old.userSignedOut["u2"] = LeaseRecord.SignOut(generation: 2, by: "app")
    // A time given to a mark an earlier version wrote is no sign-out.
    var stamped = old
    stamped.userSignedOut["u2"]?.at = time
    #expect(stamped.changes(since: old, at: time).isEmpty)
    // Dropping a mark the reader saw announces nothing.
    var dropped = stamped
    dropped.userSignedOut["u2"] = nil
    dropped.historyFloor = 2
    #expect(dropped.changes(since: old, at: time).isEmpty)
    // A sign-out made and dropped since the reader last looked: it cannot tell whose.
    var unseen = dropped
    unseen.generation = 3
    unseen.historyFloor = 3
    #expect(unseen.changes(since: old, at: time) == [.unknown])
  }

}

extension LeaseAttempt {
  fileprivate var grant: LeaseGrant? {
    if case .acquired(let grant) = self { grant } else { nil }
  }
}
