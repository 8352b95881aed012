import Foundation
import Testing

@testable import TokenStore

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// Two `FileAuthorizationLease` objects on one file stand for two processes: they share nothing
// but the file (each has its own queue, cache and watcher). The last test uses a real second
// process, `store-crasher lease-hold` (see StoreProcessTests for how it is found).
//
// No test sleeps to let a task run. Announcements from another instance are awaited with a
// 10-second bound (a failure, never a pass, if it elapses); the watching instance's poll interval
// is one hour, so only the kernel notification (inotify on Linux) can deliver them in time, and
// `synchronize()` returns once its watch is in place, before the change is made.

@Suite(.timeLimit(.minutes(5))) struct FileAuthorizationLeaseTests {
  private let user = AccountKey(account: "u1")
  private let other = AccountKey(account: "u2")

  @Test func acquireGrantsOneHolderAndTellsOthersWhoHoldsIt() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir))
    let b = FileAuthorizationLease(url: leaseURL(dir))
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    #expect(grant.owner == "A" && grant.key == user)
    // The date is the time left on the boot clock counted from b's wall clock: the grant's
    // expiry, give or take the microseconds between the two readings.
    let attempt = try await b.acquire(user, owner: "B", timeToLive: .seconds(60))
    guard case .heldElsewhere(let holder, let until) = attempt else {
      Issue.record("the key was not held: \(attempt)")
      return
    }
    #expect(holder == "A" && abs(until.timeIntervalSince(grant.expiresAt)) < 1)
    let second = try #require(
      try await b.acquire(other, owner: "B", timeToLive: .seconds(60)).grant)
    #expect(second.fence > grant.fence)
    #expect(permissions(leaseURL(dir)) == 0o600)
    #expect(permissions(dir.file("tokens.store.lease.lock")) == 0o600)
    #expect(try dir.contents() == ["tokens.store.lease", "tokens.store.lease.lock"])
  }

  @Test func anExpiredHolderIsTakenOverWithALargerFenceAndCannotRenew() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let clock = TestClock()
    let a = FileAuthorizationLease(url: leaseURL(dir), now: clock.now)
    let b = FileAuthorizationLease(url: leaseURL(dir), now: clock.now)
    let first = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(30)).grant)
    clock.advance(by: 29)
    #expect(
      try await b.acquire(user, owner: "B", timeToLive: .seconds(30))
        == .heldElsewhere(owner: "A", expiresAt: first.expiresAt))
    let renewed = try #require(try await a.renew(first, timeToLive: .seconds(30)))
    #expect(renewed.fence == first.fence && renewed.expiresAt == clock.now().addingTimeInterval(30))
    clock.advance(by: 31)
    let takeover = try #require(
      try await b.acquire(user, owner: "B", timeToLive: .seconds(30)).grant)
    #expect(takeover.fence > first.fence)
    #expect(try await a.renew(first, timeToLive: .seconds(30)) == nil)
    #expect(try await a.renew(renewed, timeToLive: .seconds(30)) == nil)
    #expect(try await b.renew(takeover, timeToLive: .seconds(60)) != nil)
    // The old holder's release does nothing: the key stays B's.
    try await a.release(first)
    #expect(
      try await a.acquire(user, owner: "C", timeToLive: .seconds(1))
        == .heldElsewhere(owner: "B", expiresAt: clock.now().addingTimeInterval(60)))
  }

  @Test func onlyTheHolderCanRelease() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir))
    let b = FileAuthorizationLease(url: leaseURL(dir))
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    let forged = LeaseGrant(
      key: user, owner: "B", fence: grant.fence + 1, generation: grant.generation,
      expiresAt: grant.expiresAt)
    try await b.release(forged)
    #expect(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant == nil)
    try await a.release(grant)
    #expect(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant != nil)
  }

  @Test func aReleaseIsAnnouncedHereAtOnceAndToAnotherInstanceByTheKernel() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir))
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    #expect(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant == nil)
    let own = a.changes()
    let elsewhere = b.changes()
    await b.synchronize()  // b's watch is in place: from here only a notification tells it
    try await a.release(grant)
    #expect(await firstChanges(own, count: 1) == [.released(user)])
    #expect(await firstChanges(elsewhere, count: 1) == [.released(user)])
  }

  @Test func withoutKernelNotificationsThePollNoticesAChange() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir))
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .milliseconds(50))
    b.watcher.usesKernelNotifications = false
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    #expect(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant == nil)
    let elsewhere = b.changes()
    await b.synchronize()
    #expect(b.watcher.sources.count == 1)  // the timer only
    try await a.release(grant)
    #expect(await firstChanges(elsewhere, count: 1) == [.released(user)])
  }

  @Test func watchingStartsWithTheFirstSubscriberAndStopsAfterTheLast() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = FileAuthorizationLease(url: leaseURL(dir))
    var first: AsyncStream<LeaseChange>? = lease.changes()
    var second: AsyncStream<LeaseChange>? = lease.changes()
    await lease.synchronize()
    #expect(lease.watcher.sources.count == 2)  // the kernel notification and the poll timer
    first = nil
    await lease.synchronize()
    #expect(lease.watcher.sources.count == 2)
    second = nil
    await lease.synchronize()
    #expect(lease.watcher.sources.isEmpty)
    _ = lease.changes()  // dropped at once: starts and stops again
    await lease.synchronize()
    #expect(lease.watcher.sources.isEmpty)
    #expect(first == nil && second == nil)
  }

  @Test func aSignOutElsewhereEndsOlderGrantsAndNamesWhoSignedOut() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let grant = try #require(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant)
    let otherGrant = try #require(
      try await b.acquire(other, owner: "B", timeToLive: .seconds(60)).grant)
    #expect(try await b.isCurrent(grant))
    let atB = b.changes()
    await b.synchronize()
    try await a.signOut(account: "u1", by: "owner-A")
    #expect(await firstChanges(atB, count: 1) == [.signedOut(account: "u1", by: "owner-A")])
    #expect(try await !b.isCurrent(grant))
    #expect(try await b.isCurrent(otherGrant))
    try await b.release(grant)
    let again = try #require(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant)
    #expect(again.generation > grant.generation)
    #expect(try await a.isCurrent(again))

    let atA = a.changes()
    await a.synchronize()
    try await b.signOutAll(by: "owner-B")
    #expect(await firstChanges(atA, count: 1) == [.signedOutAll(by: "owner-B")])
    #expect(try await !a.isCurrent(otherGrant))
    #expect(try await !a.isCurrent(again))
  }

  /// A logout is often what creates the lease file (no flight took a lease before): the
  /// sign-out it records must reach the other processes too. Found by the multi-process logout
  /// test, which failed before (the creation announced nothing).
  @Test func aSignOutThatCreatesTheFileIsAnnouncedElsewhere() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let atB = b.changes()
    await b.synchronize()
    try await a.signOut(account: "u1", by: "owner-A")
    #expect(await firstChanges(atB, count: 1) == [.signedOut(account: "u1", by: "owner-A")])
  }

  /// The first half of a logout: earlier grants stop being current in every process, and
  /// nobody hears of it (the store is not emptied yet); the sign-out is announced after.
  @Test func revokingGrantsEndsThemEverywhereAndAnnouncesNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let grant = try #require(try await b.acquire(user, owner: "B", timeToLive: .seconds(60)).grant)
    let otherGrant = try #require(
      try await b.acquire(other, owner: "B", timeToLive: .seconds(60)).grant)
    let atB = b.changes()
    await b.synchronize()
    try await a.revokeGrants(ofAccount: "u1")
    #expect(try await !b.isCurrent(grant))
    #expect(try await b.isCurrent(otherGrant))
    // Announced first is the sign-out that follows, not the revocation.
    try await a.signOut(account: "u2", by: "owner-A")
    #expect(await firstChanges(atB, count: 1) == [.signedOut(account: "u2", by: "owner-A")])
    try await a.revokeAllGrants()
    #expect(try await !b.isCurrent(otherGrant))
    let after = try #require(
      try await b.acquire(AccountKey(account: "u3"), owner: "B", timeToLive: .seconds(60)).grant)
    #expect(try await a.isCurrent(after), "grants taken after a revocation are current")
  }

  @Test func aCorruptFileIsReportedReplacedAndEndsEveryEarlierGrant() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let issues = IssueLog()
    let a = FileAuthorizationLease(url: leaseURL(dir), onIssue: issues.handler)
    let b = FileAuthorizationLease(url: leaseURL(dir), pollInterval: .seconds(3600))
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    let atB = b.changes()
    await b.synchronize()
    var generator = SeededGenerator(seed: 42)
    try randomBytes(300, using: &generator).write(to: leaseURL(dir))
    #expect(await firstChanges(atB, count: 1) == [.unknown])

    #expect(try await !a.isCurrent(grant))
    #expect(issues.codes == [.corruptFile])
    // The holders went with the garbage; a new grant is current and fenced above the old one.
    let next = try #require(try await a.acquire(user, owner: "A2", timeToLive: .seconds(60)).grant)
    #expect(next.fence > grant.fence)
    #expect(try await a.isCurrent(next))
    #expect(try await b.isCurrent(next))
    _ = try LeaseRecord.decode(Data(contentsOf: leaseURL(dir)))
  }

  @Test func aNewerVersionIsNeverReplaced() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let newer = Data(#"{"format":"authcoordinator.lease","version":99,"future":[]}"#.utf8)
    try newer.write(to: leaseURL(dir))
    let a = FileAuthorizationLease(url: leaseURL(dir))
    await #expect(throws: TokenStoreError(.unsupportedVersion, "")) {
      try await a.acquire(user, owner: "A", timeToLive: .seconds(1))
    }
    #expect(try Data(contentsOf: leaseURL(dir)) == newer)
  }

  @Test func aSymbolicLinkIsNeverFollowed() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try FileManager.default.createSymbolicLink(
      atPath: leaseURL(dir).path(percentEncoded: false), withDestinationPath: "elsewhere")
    let a = FileAuthorizationLease(url: leaseURL(dir))
    await #expect(throws: TokenStoreError(.notARegularFile, "")) {
      try await a.acquire(user, owner: "A", timeToLive: .seconds(1))
    }
    #expect(try dir.contents() == ["tokens.store.lease", "tokens.store.lease.lock"])
  }

  @Test func noFileLockIsHeldWhileAGrantIs() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileAuthorizationLease(url: leaseURL(dir))
    let subscription = a.changes()  // watching holds no lock either
    await a.synchronize()
    let grant = try #require(try await a.acquire(user, owner: "A", timeToLive: .seconds(60)).grant)
    #expect(canLockExclusively(dir.file("tokens.store.lease.lock")))
    try await a.release(grant)
    #expect(await firstChanges(subscription, count: 1) == [.released(user)])
  }

  @Test func aLockHeldElsewhereTimesOut() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lockPath = dir.file("tokens.store.lease.lock").path(percentEncoded: false)
    let fd = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(0o600))
    try #require(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
    defer { close(fd) }
    let a = FileAuthorizationLease(url: leaseURL(dir), lockTimeout: .milliseconds(20))
    await #expect(throws: TokenStoreError(.lockTimeout, "")) {
      try await a.acquire(user, owner: "A", timeToLive: .seconds(1))
    }
    #expect(!FileManager.default.fileExists(atPath: leaseURL(dir).path(percentEncoded: false)))
  }

  @Test func theLeaseOfAStoreIsNextToIt() throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = FileAuthorizationLease(nextTo: FileTokenStore(url: dir.file()))
    #expect(lease.url.path(percentEncoded: false) == leaseURL(dir).path(percentEncoded: false))
  }

  /// A real second process takes the lease (real wall clock, 500 ms) and is SIGKILLed while it
  /// holds it: it held no lock; the key is held elsewhere until the grant expires, then taken
  /// over with a larger fence.
  @Test func aKilledHolderProcessIsTakenOverOnceItsGrantExpires() async throws {
    let crasher = try requireLeaseCrasher()
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let path = leaseURL(dir).path(percentEncoded: false)
    let run = Unchecked(
      try CrasherRun(crasher, ["lease-hold", path, "--key", user.account, "--ttl-ms", "500"]))
    let line = await run.value.nextLine()
    let fence = try #require(line.flatMap { UInt64($0.dropFirst("held ".count)) }, "\(line ?? "")")
    #expect(canLockExclusively(dir.file("tokens.store.lease.lock")))
    run.value.kill()
    let ended = await run.value.wait()
    #expect(ended.reason == .uncaughtSignal && ended.status == SIGKILL)

    let record = try LeaseRecord.decode(Data(contentsOf: leaseURL(dir)))
    let holder = try #require(record.holders[user])
    #expect(holder.fence == fence && holder.owner.hasPrefix("store-crasher-"))
    // Before the expiry: this clock is pinned to 250 ms before the crasher's own expiry, so the
    // check does not depend on how fast this machine got here.
    let early = FileAuthorizationLease(
      url: leaseURL(dir), now: { holder.expiresAt.addingTimeInterval(-0.25) })
    #expect(
      try await early.acquire(user, owner: "test", timeToLive: .seconds(30))
        == .heldElsewhere(owner: holder.owner, expiresAt: holder.expiresAt))
    // Just after it (the same pinned clock, now 1 ms past the crasher's expiry): taken over.
    let late = FileAuthorizationLease(
      url: leaseURL(dir), now: { holder.expiresAt.addingTimeInterval(0.001) })
    let grant = try #require(
      try await late.acquire(user, owner: "test", timeToLive: .seconds(30)).grant)
    #expect(grant.fence > fence)
  }

  @Test func theRecordRoundTripsAndRejectsInconsistentCounters() throws {
    var record = LeaseRecord()
    record.nextFence = 8
    record.generation = 3
    record.userSignedOut["u1"] = LeaseRecord.SignOut(generation: 2, by: "app-1")
    record.allSignedOut = LeaseRecord.SignOut(generation: 3, by: "app-1")
    record.holders[user] = LeaseRecord.Holder(
      owner: "widget-2", fence: 7, expiresAt: Date(timeIntervalSinceReferenceDate: 786_000_000.25),
      bootExpiry: BootInstant(
        boot: "6f1c2e0a-3b7d-4c1e-9a55-0d2b8e4f7a10", nanoseconds: 86_415_000_000_000))
    #expect(try LeaseRecord.decode(record.encoded()) == record)
    // The example of Sources/TokenStore/Documentation.docc/TokenStores.md.
    let documented = Data(
      (#"{"allSignedOut":{"by":"app-1","generation":3},"floor":0,"#
        + #""format":"authcoordinator.lease","generation":3,"holders":[{"#
        + #""boot":"6f1c2e0a-3b7d-4c1e-9a55-0d2b8e4f7a10","bootExpiresAt":86415000000000,"#
        + #""expiresAt":786000000.25,"#
        + #""fence":7,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"widget-2"}],"#
        + #""nextFence":8,"userSignedOut":[{"by":"app-1","generation":2,"mcUid":"u1"}],"#
        + #""version":1}"#).utf8)
    #expect(try LeaseRecord.decode(documented) == record)
    #expect(try record.encoded() == documented + Data("\n".utf8))
    var inconsistent = record
    inconsistent.nextFence = 7  // the holder's fence must be below it
    #expect(throws: TokenStoreError(.corruptFile, "")) {
      try LeaseRecord.decode(inconsistent.encoded())
    }
    #expect(throws: TokenStoreError(.corruptFile, "")) { try LeaseRecord.decode(Data()) }
  }

  @Test func theTakeoverOfAnExpiredHolderIsNotAnnouncedAsARelease() {
    let start = Date(timeIntervalSinceReferenceDate: 800_000_000)
    var old = LeaseRecord()
    old.nextFence = 2
    old.holders[user] = LeaseRecord.Holder(owner: "A", fence: 1, expiresAt: start)
    var new = old
    new.nextFence = 3
    new.holders[user] = LeaseRecord.Holder(owner: "B", fence: 2, expiresAt: start + 30)
    #expect(new.changes(since: old, at: HostTime(wall: start + 1, boot: nil)).isEmpty)
    // Before A's expiry the key changed hands only through a release.
    #expect(new.changes(since: old, at: HostTime(wall: start - 1, boot: nil)) == [.released(user)])
    var recreated = new
    recreated.floor = 5
    recreated.generation = 5
    #expect(recreated.changes(since: new, at: HostTime(wall: start, boot: nil)) == [.unknown])
  }

  // MARK: - Helpers

  private func leaseURL(_ dir: TemporaryDirectory) -> URL { dir.file("tokens.store.lease") }

  /// The first `count` changes of `stream`, or fewer when 10 seconds pass first (a failure).
  private func firstChanges(
    _ stream: AsyncStream<LeaseChange>, count: Int
  ) async -> [LeaseChange] {
    await withTaskGroup(of: [LeaseChange]?.self) { group in
      group.addTask {
        var changes: [LeaseChange] = []
        for await change in stream {
          changes.append(change)
          if changes.count == count { break }
        }
        return changes
      }
      group.addTask {
        // A bound, never a pass: a missed announcement fails the test after 10 s.
        try? await ContinuousClock().sleep(for: .seconds(10))
        return nil
      }
      let first = await group.next() ?? nil
      group.cancelAll()
      return first ?? []
    }
  }

  /// Whether this process can take `flock(LOCK_EX | LOCK_NB)` on the file (then lets go).
  private func canLockExclusively(_ url: URL) -> Bool {
    let fd = open(url.path(percentEncoded: false), O_RDWR | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return flock(fd, LOCK_EX | LOCK_NB) == 0
  }

  /// Runs a blocking call (a pipe read, a wait for a child) on its own thread.
  private func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      Thread.detachNewThread { continuation.resume(returning: body()) }
    }
  }

  private func requireLeaseCrasher() throws -> URL {
    var candidates: [URL] = []
    if let explicit = ProcessInfo.processInfo.environment["STORE_CRASHER"] {
      candidates.append(URL(fileURLWithPath: explicit))
    }
    let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    candidates.append(runner.deletingLastPathComponent().appending(path: "store-crasher"))
    if let executable = Bundle.main.executableURL {
      candidates.append(executable.deletingLastPathComponent().appending(path: "store-crasher"))
    }
    for bundle in Bundle.allBundles where bundle.bundleURL.pathExtension == "xctest" {
      candidates.append(
        bundle.bundleURL.deletingLastPathComponent().appending(path: "store-crasher"))
    }
    return try #require(
      candidates.first {
        FileManager.default.isExecutableFile(atPath: $0.path(percentEncoded: false))
      },
      "store-crasher not found next to the test runner; set STORE_CRASHER to its path.")
  }
}

/// A wall clock the test moves by hand.
private final class TestClock: Sendable {
  private let date = Mutex(Date(timeIntervalSinceReferenceDate: 800_000_000))
  var now: @Sendable () -> Date { { [date] in date.withLock { $0 } } }
  func advance(by seconds: TimeInterval) { date.withLock { $0.addTimeInterval(seconds) } }
}

/// Hands a value confined to one task at a time to a closure that needs `Sendable`.
private struct Unchecked<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}

extension LeaseAttempt {
  fileprivate var grant: LeaseGrant? {
    if case .acquired(let grant) = self { grant } else { nil }
  }
}
