import Foundation
import Testing

@testable import TokenStore

/// The revoked fences: a logout's removal tells a fenced store the largest fence its lease's
/// revocation voided, and the store refuses a later save under any of those grants itself. So
/// a holder whose save lands after the removal, under a grant taken before the logout, stores
/// nothing that another process could read and refresh (fleet simulation, seed 0x679c4).
@Suite(.timeLimit(.minutes(5))) struct RevokedFenceTests {
  let models = (0...4).map { sampleModel($0) }

  @Test func aRevocationReportsAFenceAboveEveryEarlierGrantAndBelowEveryLaterOne() async throws {
    let lease = InMemoryAuthorizationLease()
    let before = try #require(
      await granted(lease.acquire(key(1), owner: "A", timeToLive: .seconds(60))))
    let other = try #require(
      await granted(lease.acquire(key(2), owner: "B", timeToLive: .seconds(60))))
    let revoked = try #require(await lease.revokeGrantsReportingFence(ofAccount: "u1"))
    #expect(revoked >= max(before.fence, other.fence))
    #expect(await !lease.isCurrent(before))
    let after = try #require(
      await granted(lease.acquire(key(3), owner: "A", timeToLive: .seconds(60))))
    #expect(after.fence > revoked)
    let all = try #require(await lease.revokeAllGrantsReportingFence())
    #expect(all >= after.fence)
  }

  @Test func aFileLeaseReportsTheFenceOfItsRecord() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let url = directory.file("tokens.store.lease")
    let lease = FileAuthorizationLease(url: url)
    let elsewhere = FileAuthorizationLease(url: url)
    let before = try #require(
      try await granted(lease.acquire(key(1), owner: "A", timeToLive: .seconds(60))))
    let revoked = try #require(try await elsewhere.revokeGrantsReportingFence(ofAccount: "u1"))
    #expect(revoked >= before.fence)
    #expect(try await !lease.isCurrent(before))
    try await lease.release(before)
    let after = try #require(
      try await granted(lease.acquire(key(1), owner: "A", timeToLive: .seconds(60))))
    #expect(after.fence > revoked)
    let all = try #require(try await lease.revokeAllGrantsReportingFence())
    #expect(all >= after.fence)
  }

  @Test func anInMemoryStoreRefusesASaveUnderARevokedGrantAfterTheRemoval() async {
    let store = InMemoryTokenStore()
    #expect(await store.save(models[1], for: key(1), fence: 3))
    await store.removeModels(forAccount: "u1", refusingFencesThrough: 5)
    #expect(await store.model(for: key(1)) == nil)
    // A holder of fence 4 or 5 (taken before the logout) finds no model to compare with:
    // without the mark its save landed.
    #expect(await !store.save(models[2], for: key(1), fence: 5))
    #expect(await !store.save(models[2], for: AccountKey(account: "u1", mode: "other"), fence: 4))
    #expect(await store.model(for: key(1)) == nil)
    // Another account, and a grant taken after the logout, are not affected.
    #expect(await store.save(models[3], for: key(2), fence: 4))
    #expect(await store.save(models[4], for: key(1), fence: 6))
    #expect(await store.model(for: key(1)) == models[4])
    // Everyone's mark covers the accounts' marks, which then go.
    await store.removeAll(refusingFencesThrough: 8)
    #expect(store.revokedFenceAccounts == 0)
    #expect(await !store.save(models[1], for: key(2), fence: 8))
    #expect(await store.save(models[1], for: key(2), fence: 9))
  }

  @Test func anInMemoryStoreMatchesTheAccountInEitherSpelling() async {
    let store = InMemoryTokenStore()
    let composed = AccountKey(account: "caf\u{E9}")
    await store.removeModels(forAccount: "cafe\u{301}", refusingFencesThrough: 5)
    #expect(await !store.save(models[1], for: composed, fence: 5))
  }

  @Test func aFileStoreKeepsTheMarkAcrossInstancesAndOneNumberPerAccount() async throws {
    let directory = try TemporaryDirectory()
    defer { directory.remove() }
    let logout = FileTokenStore(url: directory.file())
    let holder = FileTokenStore(url: directory.file())
    #expect(try await holder.save(models[1], for: key(1), fence: 3))
    for fence in [UInt64(5), 7, 6] {
      try await logout.removeModels(forAccount: "u1", refusingFencesThrough: fence)
    }
    #expect(try await holder.model(for: key(1)) == nil)
    #expect(try await !holder.save(models[2], for: key(1), fence: 7))
    #expect(try await holder.save(models[3], for: key(1), fence: 8))
    #expect(try await logout.model(for: key(1)) == models[3])
    let contents = try StoreFileFormat.decodeContents(Data(contentsOf: directory.file()))
    #expect(contents.revoked == RevokedFences(accounts: ["u1": 7]))
    try await logout.removeAll(refusingFencesThrough: 9)
    #expect(try await !holder.save(models[4], for: key(2), fence: 9))
    let emptied = try StoreFileFormat.decodeContents(Data(contentsOf: directory.file()))
    #expect(emptied.revoked == RevokedFences(all: 9))
    #expect(emptied.models.isEmpty)
  }

  @Test func theMarksRoundTripAndAFileWithoutThemIsUnchanged() throws {
    let marks = RevokedFences(accounts: ["u1": 7, "u2": 3], all: 4)
    #expect(marks.accounts == ["u1": 7], "a mark at or below everyone's refuses nothing more")
    let data = try StoreFileFormat.encode([key(1): models[1]], revoked: marks)
    #expect(try StoreFileFormat.decodeContents(data).revoked == marks)
    let plain = String(decoding: try StoreFileFormat.encode([key(1): models[1]]), as: UTF8.self)
    #expect(!plain.contains("revoked"))
  }

  @Test func aFileMarkingOneAccountTwiceIsCorrupt() throws {
    let body =
      #"{"entries":[],"revoked":[{"fence":1,"mcUid":"u1"},{"fence":2,"mcUid":"u1"}]}"#
      + "\n"
    let bytes = Data(body.utf8)
    let header =
      #"{"crc32":"\#(crcHex(bytes))","format":"authcoordinator.tokenstore","length":\#(bytes.count),"version":2}"#
    do {
      _ = try StoreFileFormat.decodeContents(Data((header + "\n").utf8) + bytes)
      Issue.record("a file marking one account twice was read")
    } catch {
      #expect(error.code == .corruptFile)
    }
  }

  private func crcHex(_ data: Data) -> String {
    let digits = String(CRC32.checksum(data), radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
  }

  /// The grant of an acquired attempt.
  private func granted(_ attempt: LeaseAttempt) -> LeaseGrant? {
    if case .acquired(let grant) = attempt { return grant }
    return nil
  }
}
