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

// A store or lease in a directory another local user controls is not trusted (the boundaries
// issue, item 5): another uid made the directory 0777 and planted a 0666 store file, and its
// token was served with nothing reported. Now the directory and the file are checked through
// their descriptors (owner, mode) and refused with `insecure_permissions` on this platform.
// (On iOS, tvOS, watchOS and visionOS the same finding is reported to `onIssue` instead.)

@Suite(.timeLimit(.minutes(5))) struct OwnershipTests {
  private let user = AccountKey(account: "u1")
  private let refused = TokenStoreError(.insecurePermissions, "")

  private static let model = AuthModel(
    uid: "2088000000000001", accessToken: "planted-token", mcUid: "u1",
    expiresAt: Date().addingTimeInterval(3600), refreshToken: "planted-refresh")

  @Test func aDirectoryWritableByOthersIsRefused() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try await FileTokenStore(url: dir.file()).save(Self.model, for: user)
    #expect(chmod(dir.url.path(percentEncoded: false), 0o777) == 0)
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    await #expect(throws: refused) { try await store.model(for: user) }
    await #expect(throws: refused) { try await store.save(Self.model, for: user) }
    await #expect(throws: refused) { try await store.validate() }
    let lease = FileAuthorizationLease(nextTo: store)
    await #expect(throws: refused) {
      try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    }
    // Thrown, not also reported; and the message says what is wrong, never a token.
    #expect(issues.codes.isEmpty)
    do {
      _ = try await store.model(for: user)
    } catch {
      #expect(error.code.rawValue == "insecure_permissions")
      #expect(error.message.contains("mode 777") && !error.message.contains("planted"))
      #expect(error.path == dir.url.path(percentEncoded: false))
    }
  }

  @Test func aStoreFileWritableByOthersIsRefused() async throws {
    for mode: mode_t in [0o666, 0o622, 0o620, 0o602] {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      try await FileTokenStore(url: dir.file()).save(Self.model, for: user)
      #expect(chmod(dir.file().path(percentEncoded: false), mode) == 0)
      let store = FileTokenStore(url: dir.file())
      await #expect(throws: refused, "mode \(String(mode, radix: 8))") {
        try await store.model(for: user)
      }
      await #expect(throws: refused, "mode \(String(mode, radix: 8))") {
        try await store.save(Self.model, for: user)
      }
      // Left as it was: never replaced by a save that trusted it.
      #expect(permissions(dir.file()) == mode)
    }
  }

  /// A file only this user could have written, but others may read: its content is trusted,
  /// its mode made 0600 through the descriptor read, and the exposure reported.
  @Test func aStoreFileReadableByOthersIsMadePrivateAndReported() async throws {
    for mode: mode_t in [0o644, 0o640, 0o604] {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      try await FileTokenStore(url: dir.file()).save(Self.model, for: user)
      #expect(chmod(dir.file().path(percentEncoded: false), mode) == 0)
      let issues = IssueLog()
      let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
      #expect(try await store.model(for: user) == Self.model)
      #expect(permissions(dir.file()) == 0o600)
      #expect(issues.codes == [.insecurePermissions], "mode \(String(mode, radix: 8))")
      #expect(issues.all.first?.message.contains("may have been read") == true)
    }
  }

  @Test func aLeaseFileOrLockFileWritableByOthersIsRefused() async throws {
    for name in ["tokens.store.lease", "tokens.store.lease.lock"] {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      let lease = FileAuthorizationLease(url: dir.file("tokens.store.lease"))
      _ = try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
      #expect(chmod(dir.file(name).path(percentEncoded: false), 0o666) == 0)
      let other = FileAuthorizationLease(url: dir.file("tokens.store.lease"))
      await #expect(throws: refused, "\(name)") {
        try await other.acquire(user, owner: "B", timeToLive: .seconds(30))
      }
    }
    // The lease file holds no token: group and others may read it.
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let lease = FileAuthorizationLease(url: dir.file("tokens.store.lease"))
    _ = try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    #expect(chmod(dir.file("tokens.store.lease").path(percentEncoded: false), 0o644) == 0)
    let attempt = try await FileAuthorizationLease(url: dir.file("tokens.store.lease"))
      .acquire(user, owner: "B", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, _) = attempt else {
      Issue.record("the lease was not read: \(attempt)")
      return
    }
    #expect(owner == "A")
  }

  @Test(.enabled(if: geteuid() == 0, "needs root to give the files to another user id"))
  func aDirectoryOrFileOwnedByAnotherUserIsRefused() async throws {
    let nobody: uid_t = 65534
    // The directory.
    do {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      try await FileTokenStore(url: dir.file()).save(Self.model, for: user)
      #expect(chown(dir.url.path(percentEncoded: false), nobody, gid_t(nobody)) == 0)
      let store = FileTokenStore(url: dir.file())
      await #expect(throws: refused) { try await store.model(for: user) }
      await #expect(throws: refused) {
        try await FileAuthorizationLease(nextTo: store)
          .acquire(user, owner: "A", timeToLive: .seconds(30))
      }
    }
    // The file (0600, in this user's 0700 directory), and the lease's lock file.
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try await FileTokenStore(url: dir.file()).save(Self.model, for: user)
    #expect(chown(dir.file().path(percentEncoded: false), nobody, gid_t(nobody)) == 0)
    let store = FileTokenStore(url: dir.file())
    await #expect(throws: refused) { try await store.model(for: user) }
    await #expect(throws: refused) { try await store.save(Self.model, for: user) }
    let lease = FileAuthorizationLease(nextTo: store)
    _ = try await lease.acquire(user, owner: "A", timeToLive: .seconds(30))
    #expect(chown(dir.file("tokens.store.lease.lock").path(percentEncoded: false), nobody, 0) == 0)
    await #expect(throws: refused) {
      try await FileAuthorizationLease(nextTo: store)
        .acquire(user, owner: "B", timeToLive: .seconds(30))
    }
  }

  @Test func aPrivateDirectoryKeepsWorking() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    #expect(chmod(dir.url.path(percentEncoded: false), 0o700) == 0)
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    try await store.save(Self.model, for: user)
    #expect(try await FileTokenStore(url: dir.file()).model(for: user) == Self.model)
    let lease = FileAuthorizationLease(nextTo: store, onIssue: issues.handler)
    #expect(try await lease.acquire(user, owner: "A", timeToLive: .seconds(30)).isAcquired)
    // A directory others may enter and list (0755) but not write is fine too; so is one the
    // store creates.
    #expect(chmod(dir.url.path(percentEncoded: false), 0o755) == 0)
    #expect(try await FileTokenStore(url: dir.file()).model(for: user) == Self.model)
    let nested = FileTokenStore(url: dir.url.appending(path: "a/b/tokens.store"))
    try await nested.save(Self.model, for: user)
    #expect(try await nested.model(for: user) == Self.model)
    #expect(issues.codes.isEmpty)
  }

  @Test func theReportingPolicyReportsOnceAndGoesOn() throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    #expect(chmod(dir.url.path(percentEncoded: false), 0o777) == 0)
    try Data("x".utf8).write(to: dir.file())
    #expect(chmod(dir.file().path(percentEncoded: false), 0o666) == 0)
    let issues = IssueLog()
    let file = DurableFile(
      url: dir.file(), noun: "the store", holdsSecrets: true, ownershipPolicy: .report,
      onIssue: issues.handler)
    for _ in 0..<3 {
      guard case .data(let data, _) = try file.read(maximumSize: 100) else {
        Issue.record("the file was not read")
        return
      }
      #expect(data == Data("x".utf8))
    }
    // The directory and the file, once each.
    #expect(issues.codes == [.insecurePermissions, .insecurePermissions])
  }
}

extension LeaseAttempt {
  fileprivate var isAcquired: Bool {
    if case .acquired = self { true } else { false }
  }
}
