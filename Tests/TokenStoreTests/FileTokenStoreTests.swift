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

@Suite(.timeLimit(.minutes(5))) struct FileTokenStoreTests {
  // MARK: - Normal operation

  @Test func roundTripAcrossInstances() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    var expected: [AccountKey: AuthModel] = [:]
    for n in 1...5 {
      expected[key(n)] = sampleModel(n, expires: n != 3)
      try await store.save(expected[key(n)]!, for: key(n))
    }
    let otherMode = AccountKey(account: "u1", mode: "another-mode")
    expected[otherMode] = sampleModel(7)
    try await store.save(expected[otherMode]!, for: otherMode)
    #expect(try await store.model(for: key(2)) == expected[key(2)])
    #expect(try await store.model(for: key(99)) == nil)
    let reopened = FileTokenStore(url: dir.file())
    #expect(try await reopened.loadAll() == expected)
    #expect(try await reopened.model(for: otherMode) == expected[otherMode])
    try await reopened.validate()
  }

  @Test func removeModelAndRemoveAll() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    try await store.removeModel(for: key(1))  // nothing there: no file is created
    try await store.removeAll()
    #expect(!FileManager.default.fileExists(atPath: dir.file().path(percentEncoded: false)))
    try await store.save(sampleModel(1), for: key(1))
    try await store.save(sampleModel(2), for: key(2))
    try await store.removeModel(for: key(1))
    #expect(try await FileTokenStore(url: dir.file()).model(for: key(1)) == nil)
    #expect(try await FileTokenStore(url: dir.file()).model(for: key(2)) != nil)
    try await store.removeAll()
    #expect(try await FileTokenStore(url: dir.file()).loadAll().isEmpty)
  }

  @Test func fileAndLockFileHaveMode0600() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    try await store.save(sampleModel(1), for: key(1))
    #expect(permissions(dir.file()) == 0o600)
    #expect(permissions(dir.file("tokens.store.lock")) == 0o600)
    // A pre-existing file with looser permissions is replaced by a 0600 one.
    chmod(dir.file().path(percentEncoded: false), 0o644)
    try await store.save(sampleModel(2), for: key(2))
    #expect(permissions(dir.file()) == 0o600)
  }

  @Test func atomicReplaceLeavesNoTemporaryFiles() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    for n in 0..<25 {
      try await store.save(sampleModel(n % 4), for: key(n % 4))
    }
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
  }

  @Test func staleTemporaryFilesOfACrashedWriterAreRemoved() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try Data("half a file".utf8).writePrivately(to: dir.file("tokens.store.tmp-4242-deadbeef"))
    try Data("unrelated".utf8).writePrivately(to: dir.file("other.store.tmp-1-1"))
    try await FileTokenStore(url: dir.file()).save(sampleModel(1), for: key(1))
    #expect(try dir.contents() == ["other.store.tmp-1-1", "tokens.store", "tokens.store.lock"])
  }

  @Test func missingDirectoryIsCreatedBySaveNotByRead() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let url = dir.url.appending(path: "a/b/tokens.store")
    let store = FileTokenStore(url: url)
    #expect(try await store.model(for: key(1)) == nil)
    #expect(try dir.contents().isEmpty)
    try await store.save(sampleModel(1), for: key(1))
    #expect(permissions(dir.url.appending(path: "a/b")) == 0o700)
    #expect(try await FileTokenStore(url: url).model(for: key(1)) != nil)
  }

  @Test func writesOfAnotherInstanceAreSeen() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let a = FileTokenStore(url: dir.file())
    let b = FileTokenStore(url: dir.file())
    #expect(try await a.model(for: key(1)) == nil)  // caches "empty"
    let one = sampleModel(1)
    try await b.save(one, for: key(1))
    #expect(try await a.model(for: key(1)) == one)  // the file changed: re-read
    let two = sampleModel(2)
    try await a.save(two, for: key(2))
    #expect(try await b.loadAll() == [key(1): one, key(2): two])
    try await b.removeAll()
    #expect(try await a.model(for: key(2)) == nil)
  }

  @Test func concurrentSavesThroughTwoInstancesLoseNothing() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let stores = [FileTokenStore(url: dir.file()), FileTokenStore(url: dir.file())]
    try await withThrowingTaskGroup(of: Void.self) { group in
      for n in 0..<40 {
        group.addTask { try await stores[n % 2].save(sampleModel(n), for: key(n)) }
      }
      try await group.waitForAll()
    }
    #expect(try await FileTokenStore(url: dir.file()).loadAll().count == 40)
  }

  // MARK: - Hostile files

  @Test func corruptFileIsReportedMovedAsideAndTreatedAsEmpty() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let garbage = Data("{\"format\": this is not a token store}\n\u{0}\u{1}".utf8)
    try garbage.writePrivately(to: dir.file())
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    #expect(try await store.model(for: key(1)) == nil)
    #expect(issues.codes == [.corruptFile])
    #expect(issues.all.first?.path == dir.file().path(percentEncoded: false))
    let aside = try #require(try dir.contents().first { $0.hasPrefix("tokens.store.corrupt-") })
    #expect(try Data(contentsOf: dir.file(aside)) == garbage)  // kept for diagnosis
    #expect(!FileManager.default.fileExists(atPath: dir.file().path(percentEncoded: false)))
    // The store works again, and the diagnosis copy is not touched.
    let model = sampleModel(1)
    try await store.save(model, for: key(1))
    #expect(try await FileTokenStore(url: dir.file()).loadAll() == [key(1): model])
    #expect(try Data(contentsOf: dir.file(aside)) == garbage)
    #expect(issues.codes == [.corruptFile])
  }

  @Test func truncatedFileIsSurfacedByLoadAllThenEmpty() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let full = try StoreFileFormat.encode([key(1): sampleModel(1), key(2): sampleModel(2)])
    try full.prefix(full.count - 10).writePrivately(to: dir.file())
    let store = FileTokenStore(url: dir.file())
    await #expect(throws: TokenStoreError(.truncatedFile, "")) { try await store.validate() }
    await #expect(throws: TokenStoreError(.truncatedFile, "")) { try await store.loadAll() }
    #expect(try await store.loadAll().isEmpty)  // moved aside by the previous call
    #expect(try dir.contents().contains { $0.hasPrefix("tokens.store.corrupt-") })
  }

  @Test func randomBytesNeverCrashAndNeverBlockTheStore() async throws {
    var generator = SeededGenerator(seed: testSeed("randomBytesNeverCrashAndNeverBlockTheStore"))
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    for round in 0..<20 {
      let bytes = randomBytes(Int.random(in: 0...4096, using: &generator), using: &generator)
      try bytes.writePrivately(to: dir.file())
      let issues = IssueLog()
      let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
      #expect(try await store.model(for: key(1)) == nil, "round \(round)")
      #expect(issues.codes == [.corruptFile] || issues.codes == [.truncatedFile])
      let model = sampleModel(round)
      try await store.save(model, for: key(1))
      #expect(try await FileTokenStore(url: dir.file()).model(for: key(1)) == model)
    }
    // Only the newest few quarantined copies are kept.
    #expect(
      try dir.contents().filter { $0.contains(".corrupt-") }.count
        == FileTokenStore.defaultMaximumQuarantinedFiles)
  }

  @Test func hundredMegabyteFileIsRefusedWithoutReadingIt() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    // A sparse 100 MB file: cheap to make, and reading it would take visible memory and time.
    let fd = open(dir.file().path(percentEncoded: false), O_WRONLY | O_CREAT, 0o600)
    #expect(fd >= 0)
    #expect(ftruncate(fd, 100 * 1024 * 1024) == 0)
    close(fd)
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    await #expect(throws: TokenStoreError(.fileTooLarge, "")) { try await store.validate() }
    #expect(try await store.model(for: key(1)) == nil)
    #expect(issues.codes == [.fileTooLarge])
    let aside = try #require(try dir.contents().first { $0.contains(".corrupt-") })
    let size =
      try FileManager.default.attributesOfItem(
        atPath: dir.file(aside).path(percentEncoded: false))[.size] as? Int
    #expect(size == 100 * 1024 * 1024)
    try await store.save(sampleModel(1), for: key(1))
    #expect(try await store.loadAll().count == 1)
  }

  @Test func sizeCapIsConfigurable() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try await FileTokenStore(url: dir.file()).save(sampleModel(1), for: key(1))
    let small = FileTokenStore(url: dir.file(), maximumFileSize: 64)
    await #expect(throws: TokenStoreError(.fileTooLarge, "")) { try await small.loadAll() }
    #expect(small.maximumFileSize == 64)
    #expect(FileTokenStore(url: dir.file()).maximumFileSize == 16 * 1024 * 1024)
  }

  @Test func newerVersionIsReadAsEmptyButNeverOverwritten() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let newer = Data(
      (#"{"format":"authcoordinator.tokenstore","version":7,"shards":3}"# + "\nnew stuff\n")
        .utf8)
    try newer.writePrivately(to: dir.file())
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    #expect(try await store.model(for: key(1)) == nil)
    #expect(issues.codes == [.unsupportedVersion])
    let unsupported = TokenStoreError(.unsupportedVersion, "")
    await #expect(throws: unsupported) { try await store.save(sampleModel(1), for: key(1)) }
    await #expect(throws: unsupported) { try await store.removeModel(for: key(1)) }
    await #expect(throws: unsupported) { try await store.removeAll() }
    await #expect(throws: unsupported) { try await store.loadAll() }
    await #expect(throws: unsupported) { try await store.validate() }
    await #expect(throws: unsupported) {
      try await FileTokenStore(url: dir.file()).save(sampleModel(2), for: key(2))
    }
    #expect(try Data(contentsOf: dir.file()) == newer)
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
    // Once the newer file is gone (say, the user deleted it), the store works again.
    try FileManager.default.removeItem(at: dir.file())
    try await store.save(sampleModel(1), for: key(1))
    #expect(try await store.loadAll().count == 1)
  }

  @Test func symbolicLinkIsNeverFollowed() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let elsewhere = dir.file("elsewhere.store")
    let original = try StoreFileFormat.encode([key(1): sampleModel(1)])
    try original.write(to: elsewhere)
    try FileManager.default.createSymbolicLink(at: dir.file(), withDestinationURL: elsewhere)
    let store = FileTokenStore(url: dir.file())
    let notRegular = TokenStoreError(.notARegularFile, "")
    await #expect(throws: notRegular) { try await store.model(for: key(1)) }
    await #expect(throws: notRegular) { try await store.save(sampleModel(2), for: key(2)) }
    await #expect(throws: notRegular) { try await store.removeAll() }
    await #expect(throws: notRegular) { try await store.validate() }
    #expect(try Data(contentsOf: elsewhere) == original)
    let link = try FileManager.default.destinationOfSymbolicLink(
      atPath: dir.file().path(percentEncoded: false))
    #expect(link == elsewhere.path(percentEncoded: false))
  }

  @Test func danglingSymbolicLinkIsNotWrittenThrough() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let target = dir.file("target-does-not-exist")
    try FileManager.default.createSymbolicLink(at: dir.file(), withDestinationURL: target)
    await #expect(throws: TokenStoreError(.notARegularFile, "")) {
      try await FileTokenStore(url: dir.file()).save(sampleModel(1), for: key(1))
    }
    #expect(!FileManager.default.fileExists(atPath: target.path(percentEncoded: false)))
  }

  @Test func symbolicLinkAsLockFileIsRefused() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let target = dir.file("victim")
    try FileManager.default.createSymbolicLink(
      at: dir.file("tokens.store.lock"), withDestinationURL: target)
    await #expect(throws: TokenStoreError(.notARegularFile, "")) {
      try await FileTokenStore(url: dir.file()).save(sampleModel(1), for: key(1))
    }
    #expect(!FileManager.default.fileExists(atPath: target.path(percentEncoded: false)))
  }

  @Test func directoryOrFifoAtThePathIsNotARegularFile() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try FileManager.default.createDirectory(at: dir.file(), withIntermediateDirectories: false)
    #expect(mkfifo(dir.file("fifo.store").path(percentEncoded: false), 0o600) == 0)
    for name in ["tokens.store", "fifo.store"] {
      let store = FileTokenStore(url: dir.file(name))
      let notRegular = TokenStoreError(.notARegularFile, "")
      await #expect(throws: notRegular) { try await store.model(for: key(1)) }
      await #expect(throws: notRegular) { try await store.validate() }
      await #expect(throws: notRegular) { try await store.save(sampleModel(1), for: key(1)) }
    }
  }

  // As root, chmod 000 does not stop reading: StoreProcessTests covers root by dropping
  // privileges in a child process (unreadableFileIsPermissionDeniedForAnotherUser).
  @Test(.enabled(if: getuid() != 0, "root reads files whatever their mode; see StoreProcessTests"))
  func unreadableFileIsPermissionDenied() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    try await store.save(sampleModel(1), for: key(1))
    let before = try Data(contentsOf: dir.file())
    chmod(dir.file().path(percentEncoded: false), 0)
    defer { chmod(dir.file().path(percentEncoded: false), 0o600) }
    let denied = TokenStoreError(.permissionDenied, "")
    let fresh = FileTokenStore(url: dir.file())
    await #expect(throws: denied) { try await fresh.model(for: key(1)) }
    await #expect(throws: denied) { try await fresh.save(sampleModel(2), for: key(2)) }
    chmod(dir.file().path(percentEncoded: false), 0o600)
    #expect(try Data(contentsOf: dir.file()) == before)
  }

  #if os(Linux)
    /// In a directory nothing may be renamed or created in (`chattr +i`, which binds root too),
    /// a corrupt file cannot be moved aside: reads report it and read as empty, writes fail, and
    /// the file stays as it was.
    @Test(.enabled(if: immutableDirectoriesWork(), "needs root and chattr +i (ext4 and the like)"))
    func corruptFileThatCannotBeMovedAsideIsReportedAndKept() async throws {
      let dir = try TemporaryDirectory()
      defer { dir.remove() }
      let garbage = Data("garbage".utf8)
      try garbage.writePrivately(to: dir.file())
      try garbage.writePrivately(to: dir.file("locked.store"))
      // The lock can be taken, not the move.
      try Data().writePrivately(to: dir.file("locked.store.lock"))
      #expect(setImmutable(dir.url, true))
      defer { setImmutable(dir.url, false) }
      for name in ["tokens.store", "locked.store"] {
        let issues = IssueLog()
        let store = FileTokenStore(url: dir.file(name), onIssue: issues.handler)
        #expect(try await store.model(for: key(1)) == nil, "\(name)")
        #expect(issues.codes == [.corruptFile], "\(name)")
        // Without a lock file there is no lock, so no move is even tried.
        let tried = issues.all.first?.message.contains("could not be moved aside")
        #expect(tried == (name == "locked.store"), "\(name)")
        await #expect(throws: TokenStoreError(.permissionDenied, "")) {
          try await store.save(sampleModel(1), for: key(1))
        }
        #expect(try Data(contentsOf: dir.file(name)) == garbage)
      }
      #expect(try dir.contents() == ["locked.store", "locked.store.lock", "tokens.store"])
    }
  #endif

  // MARK: - Never lose a good model

  @Test func failedSaveLeavesThePreviousFileIntact() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    let good = sampleModel(1)
    try await store.save(good, for: key(1))
    let before = try Data(contentsOf: dir.file())
    let unencodable = AuthModel(
      uid: "1", accessToken: "t", mcUid: "u1",
      expiresAt: Date(timeIntervalSinceReferenceDate: .infinity))
    await #expect(throws: TokenStoreError(.encodingFailed, "")) {
      try await store.save(unencodable, for: key(2))
    }
    #expect(try Data(contentsOf: dir.file()) == before)
    #expect(try await store.model(for: key(1)) == good)
    #expect(try await store.model(for: key(2)) == nil)
    #expect(try dir.contents() == ["tokens.store", "tokens.store.lock"])
  }

  @Test func validateHasNoSideEffects() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    try await store.validate()  // a missing file is an empty store
    try Data("garbage".utf8).writePrivately(to: dir.file())
    await #expect(throws: TokenStoreError(.corruptFile, "")) { try await store.validate() }
    await #expect(throws: TokenStoreError(.corruptFile, "")) { try await store.validate() }
    #expect(try dir.contents() == ["tokens.store"])
    #expect(try await store.model(for: key(1)) == nil)  // a read moves it aside
    #expect(try dir.contents().count == 2)
  }
}
