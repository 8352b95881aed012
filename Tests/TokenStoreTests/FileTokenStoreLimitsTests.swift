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

/// The store's own limits: how long it waits for the file lock, how large a file it writes, and
/// how many quarantined (`.corrupt-*`) copies of bad files it keeps.
///
/// Nothing here waits on the wall clock: the lock tests call the store while another descriptor
/// holds the lock and check that the call returned with the lock still held. A store that waited
/// without limit would never return; the suite's time limit turns that into a failure.
@Suite(.timeLimit(.minutes(1))) struct FileTokenStoreLimitsTests {
  // MARK: - Lock timeout

  @Test func writesGiveUpWithLockTimeoutWhileAnotherDescriptorHoldsTheLock() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file(), lockTimeout: .milliseconds(200))
    let kept = sampleModel(1)
    try await store.save(kept, for: key(1))

    // Another open file description holds the lock, as another process (or a stuck thread of
    // this one) would.
    let holder = try LockHolder(path: dir.file("tokens.store.lock"))
    defer { holder.release() }
    let operations: [(String, @Sendable () async throws -> Void)] = [
      ("save", { try await store.save(sampleModel(2), for: key(2)) }),
      ("removeModel", { try await store.removeModel(for: key(1)) }),
      ("removeModels(forAccount:)", { try await store.removeModels(forAccount: "u1") }),
      ("removeAll", { try await store.removeAll() }),
    ]
    for (name, operation) in operations {
      let error = await errorThrown(by: operation)
      #expect(holder.isHeld, "\(name) returned while the lock was still held elsewhere")
      #expect(
        (error as? TokenStoreError)?.code == .lockTimeout, "\(name): \(String(describing: error))")
    }

    // Released: the store works again and nothing was lost.
    holder.release()
    let added = sampleModel(2)
    try await store.save(added, for: key(2))
    #expect(try await FileTokenStore(url: dir.file()).loadAll() == [key(1): kept, key(2): added])
  }

  @Test func readsOfAGoodFileDoNotWaitForTheLock() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let kept = sampleModel(1)
    try await FileTokenStore(url: dir.file()).save(kept, for: key(1))
    let holder = try LockHolder(path: dir.file("tokens.store.lock"))
    defer { holder.release() }
    let store = FileTokenStore(url: dir.file(), lockTimeout: .milliseconds(200))
    let models = try await store.loadAll()
    #expect(holder.isHeld, "the read returned while the lock was still held elsewhere")
    #expect(models == [key(1): kept])
    #expect(try await store.model(for: key(1)) == kept)
  }

  @Test func aBadFileFoundWhileTheLockIsHeldIsReportedAndLeftInPlace() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let garbage = Data("{\"format\": not a store}\n".utf8)
    try garbage.writePrivately(to: dir.file())
    let holder = try LockHolder(path: dir.file("tokens.store.lock"))
    defer { holder.release() }
    let issues = IssueLog()
    let store = FileTokenStore(
      url: dir.file(), lockTimeout: .milliseconds(200), onIssue: issues.handler)
    let error = await errorThrown { _ = try await store.model(for: key(1)) }
    #expect(holder.isHeld, "the read of a bad file returned while the lock was still held")
    #expect(error == nil)
    #expect(issues.codes == [.corruptFile])
    // Moving aside needs the lock: the file stays where it is until a later call gets it.
    #expect(try Data(contentsOf: dir.file()) == garbage)
    holder.release()
    let model = sampleModel(1)
    try await store.save(model, for: key(1))
    #expect(try await FileTokenStore(url: dir.file()).loadAll() == [key(1): model])
    #expect(try dir.contents().contains { $0.hasPrefix("tokens.store.corrupt-") })
  }

  @Test func lockTimeoutDefaultsToFiveSecondsAndIsConfigurable() {
    let url = URL(fileURLWithPath: "/nonexistent/tokens.store")
    #expect(FileTokenStore.defaultLockTimeout == .seconds(5))
    #expect(FileTokenStore(url: url).lockTimeout == .seconds(5))
    #expect(
      FileTokenStore(url: url, lockTimeout: .milliseconds(20)).lockTimeout == .milliseconds(20))
    #expect(FileTokenStore(url: url, lockTimeout: .seconds(-1)).lockTimeout == .zero)
    #expect(TokenStoreError.Code.lockTimeout.rawValue == "lock_timeout")
  }

  // MARK: - Never write what a read would reject

  @Test func aSaveThatWouldExceedTheSizeCapIsRefusedAndLosesNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), maximumFileSize: 600, onIssue: issues.handler)
    let small = sampleModel(1)
    try await store.save(small, for: key(1))
    let before = try Data(contentsOf: dir.file())
    #expect(before.count <= 600)

    let big = AuthModel(
      uid: "2088000000000002", accessToken: String(repeating: "x", count: 700), mcUid: "u2")
    await #expect(throws: TokenStoreError(.fileTooLarge, "")) {
      try await store.save(big, for: key(2))
    }
    // The previous file is untouched, nothing was moved aside, every key is still there.
    #expect(try Data(contentsOf: dir.file()) == before)
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
    let reopened = FileTokenStore(url: dir.file(), maximumFileSize: 600, onIssue: issues.handler)
    #expect(try await reopened.loadAll() == [key(1): small])
    #expect(try await store.model(for: key(1)) == small)
    #expect(try await store.model(for: key(2)) == nil)
    #expect(issues.all.isEmpty)
  }

  // MARK: - Quarantined copies

  @Test func atMostTheConfiguredNumberOfQuarantinedCopiesAreKeptNewestFirst() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    var lastGarbage = Data()
    for round in 0..<6 {
      lastGarbage = Data("garbage \(round) with token-\(round)\n".utf8)
      try lastGarbage.writePrivately(to: dir.file())
      let store = FileTokenStore(url: dir.file(), maximumQuarantinedFiles: 2)
      #expect(try await store.model(for: key(1)) == nil)
      let aside = try dir.contents().filter { $0.hasPrefix("tokens.store.corrupt-") }
      #expect(aside.count == min(round + 1, 2), "round \(round): \(aside)")
    }
    let kept = try dir.contents().filter { $0.hasPrefix("tokens.store.corrupt-") }
    let contents = try kept.map { try Data(contentsOf: dir.file($0)) }
    #expect(contents.contains(lastGarbage), "the newest copy was deleted")
    #expect(Set(contents) == [Data("garbage 4 with token-4\n".utf8), lastGarbage])
  }

  @Test func theDefaultKeepsThreeQuarantinedCopies() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    #expect(FileTokenStore.defaultMaximumQuarantinedFiles == 3)
    for round in 0..<5 {
      try Data("garbage \(round)\n".utf8).writePrivately(to: dir.file())
      #expect(try await FileTokenStore(url: dir.file()).model(for: key(1)) == nil)
    }
    #expect(try dir.contents().filter { $0.contains(".corrupt-") }.count == 3)
  }

  @Test func zeroQuarantinedCopiesDeletesABadFileInsteadOfKeepingIt() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try Data("garbage token-u1\n".utf8).writePrivately(to: dir.file())
    let issues = IssueLog()
    let store = FileTokenStore(
      url: dir.file(), maximumQuarantinedFiles: -1, onIssue: issues.handler)
    #expect(store.maximumQuarantinedFiles == 0)
    #expect(try await store.model(for: key(1)) == nil)
    #expect(issues.codes == [.corruptFile])
    #expect(try dir.contents() == ["tokens.store.lock"])
  }

  @Test func removalsDeleteEveryQuarantinedCopy() async throws {
    let removals: [(String, @Sendable (FileTokenStore) async throws -> Void)] = [
      ("removeAll", { try await $0.removeAll() }),
      ("removeModels(forAccount:)", { try await $0.removeModels(forAccount: "u1") }),
      ("removeModel(for:)", { try await $0.removeModel(for: key(1)) }),
    ]
    for (name, remove) in removals {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      // Two bad files moved aside (holding what may be live tokens), then a good file.
      for round in 0..<2 {
        try Data("garbage \(round) token-u1\n".utf8).writePrivately(to: dir.file())
        #expect(try await FileTokenStore(url: dir.file()).model(for: key(1)) == nil)
      }
      let store = FileTokenStore(url: dir.file())
      let other = sampleModel(2)
      try await store.save(other, for: key(2))
      #expect(try dir.contents().filter { $0.contains(".corrupt-") }.count == 2, "\(name)")

      // The user signs out; the file does not even hold a model of theirs.
      try await remove(store)
      #expect(
        try dir.contents().filter { $0.contains(".corrupt-") }.isEmpty,
        "\(name) left quarantined copies behind")
      let expected: [AccountKey: AuthModel] = name == "removeAll" ? [:] : [key(2): other]
      #expect(try await FileTokenStore(url: dir.file()).loadAll() == expected, "\(name)")
    }
  }

  @Test func aRemovalThatFindsABadFileDeletesItInsteadOfKeepingIt() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try Data("garbage token-u1\n".utf8).writePrivately(to: dir.file())
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    try await store.removeModels(forAccount: "u1")
    #expect(issues.codes == [.corruptFile])
    #expect(try dir.contents() == ["tokens.store.lock"])
  }
}

// MARK: - Helpers

/// Holds an exclusive `flock` on a file through its own open file description, as another
/// process would.
private final class LockHolder: Sendable {
  private let descriptor: Mutex<Int32?>

  init(path url: URL) throws {
    let fd = open(url.path(percentEncoded: false), O_RDWR | O_CREAT | O_CLOEXEC, mode_t(0o600))
    guard fd >= 0 else { throw POSIXErrorDescription(call: "open", errno: errno) }
    guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
      let code = errno
      close(fd)
      throw POSIXErrorDescription(call: "flock", errno: code)
    }
    descriptor = Mutex(fd)
  }

  /// Whether the lock is still held (not released).
  var isHeld: Bool { descriptor.withLock { $0 != nil } }

  /// Releases the lock (closing the descriptor); later calls do nothing.
  func release() {
    descriptor.withLock { fd in
      if let open = fd { close(open) }
      fd = nil
    }
  }
}

/// The error `operation` throws, or `nil` when it returns.
private func errorThrown(by operation: @Sendable () async throws -> Void) async -> (any Error)? {
  do {
    try await operation()
    return nil
  } catch {
    return error
  }
}
