import Foundation
import Testing

@testable import TokenStore

// A lease file whose holder expiry is absurd (1e300 seconds, before 1970, centuries ahead) is a
// corrupt record: reported, replaced, and never a holder anyone waits for.

@Suite(.timeLimit(.minutes(2))) struct LeaseExpiryRangeTests {
  private let user = AccountKey(account: "u1")

  /// A consistent lease record whose one holder of `u1` expires `expiresAt` (seconds since
  /// 2001-01-01, as written in the file).
  static func record(expiresAt: String) -> Data {
    Data(
      (#"{"floor":0,"format":"authcoordinator.lease","generation":0,"holders":[{"expiresAt":"#
        + expiresAt
        + #","fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"elsewhere"}],"#
        + #""nextFence":2,"userSignedOut":[],"version":1}"#).utf8)
  }

  @Test(arguments: [
    "1e300", "-1e300", "1.7976931348623157e308", "1e12",
    // 1969-12-31T23:59:59Z: before the Unix epoch.
    "-978307201",
  ])
  func anOutOfRangeHolderExpiryIsACorruptRecordAndTheKeyCanBeTaken(_ expiresAt: String)
    async throws
  {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.file("tokens.store.lease")
    try Self.record(expiresAt: expiresAt).write(to: url)
    let issues = IssueLog()
    let lease = FileAuthorizationLease(url: url, onIssue: issues.handler)

    let attempt = try await lease.acquire(user, owner: "here", timeToLive: .seconds(60))
    guard case .acquired(let grant) = attempt else {
      Issue.record("the out-of-range holder still holds the key: \(attempt)")
      return
    }
    #expect(grant.owner == "here")
    #expect(issues.codes == [.corruptFile])
    #expect(throws: TokenStoreError(.corruptFile, "")) {
      try LeaseRecord.decode(Self.record(expiresAt: expiresAt), at: HostClock.system.now())
    }
  }

  @Test func anInRangeHolderExpiryStillHoldsTheKey() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.file("tokens.store.lease")
    let soon = Date().addingTimeInterval(3600).timeIntervalSinceReferenceDate
    try Self.record(expiresAt: String(soon)).write(to: url)
    let issues = IssueLog()
    let lease = FileAuthorizationLease(url: url, onIssue: issues.handler)
    let attempt = try await lease.acquire(user, owner: "here", timeToLive: .seconds(60))
    guard case .heldElsewhere(let owner, _) = attempt else {
      Issue.record("an in-range holder lost the key: \(attempt)")
      return
    }
    #expect(owner == "elsewhere")
    #expect(issues.codes.isEmpty)
  }

  @Test func aTimeToLiveBeyondTheHorizonIsShortenedSoTheFileStaysReadable() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.file("tokens.store.lease")
    let issues = IssueLog()
    let a = FileAuthorizationLease(url: url, onIssue: issues.handler)
    let b = FileAuthorizationLease(url: url, onIssue: issues.handler)
    let attempt = try await a.acquire(user, owner: "A", timeToLive: .seconds(Int64.max))
    guard case .acquired(let grant) = attempt else {
      Issue.record("the first acquire failed: \(attempt)")
      return
    }
    #expect(grant.expiresAt <= Date().addingTimeInterval(LeaseRecord.maximumTimeToLive))
    // Another instance reads the record back: still held, nothing reported.
    let other = try await b.acquire(user, owner: "B", timeToLive: .seconds(60))
    guard case .heldElsewhere(let owner, _) = other else {
      Issue.record("the long grant was lost: \(other)")
      return
    }
    #expect(owner == "A")
    #expect(issues.codes.isEmpty)
    #expect(try await b.isCurrent(grant))
  }
}
