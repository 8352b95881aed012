import Foundation
import Testing

@testable import TokenStore

/// The optional refresh token (format version 2): redaction, round trips through both stores,
/// and reading version-1 files.
@Suite(.timeLimit(.minutes(2))) struct RefreshTokenTests {
  /// Distinctive enough that finding it in any output can only mean a leak.
  static let secret = "RT-7f3a9c-do-not-print-this-refresh-token"
  static let access = "AT-51d0e2-do-not-print-this-access-token"

  let withRefresh = AuthModel(
    uid: "2088000000000007", accessToken: access, mcUid: "u7",
    expiresAt: Date(timeIntervalSinceReferenceDate: 812_345_678.25), extraInfo: ["scene": "pay"],
    refreshToken: secret)
  let withoutRefresh = AuthModel(uid: "2088000000000008", accessToken: access, mcUid: "u8")

  // MARK: - The model

  /// Every caller parked on a flight holds a model in its async frames: a model 16 bytes
  /// larger pushed each one into a second 984-byte task-allocator slab (benchmark B2, heap per
  /// parked caller 2,570 B to 3,594 B). The refresh token and `extraInfo` share one reference.
  @Test func aModelIsNoLargerThanBeforeTheRefreshToken() {
    #expect(MemoryLayout<AuthModel>.size <= 72, "\(MemoryLayout<AuthModel>.size) bytes")
    var model = AuthModel(uid: "2088", accessToken: "a", mcUid: "u1")
    let copy = model
    model.refreshToken = "r"
    model.extraInfo["scope"] = "auth_base"
    #expect(copy.refreshToken == nil && copy.extraInfo.isEmpty, "a copy does not change")
    #expect(model.refreshToken == "r" && model.extraInfo == ["scope": "auth_base"])
    #expect(model != copy)
  }

  @Test func refreshTokenDefaultsToNilSoExistingCallsAreUnchanged() {
    let model = AuthModel(uid: "1", accessToken: "t", mcUid: "u", expiresAt: nil, extraInfo: [:])
    #expect(model.refreshToken == nil)
    var changed = model
    changed.refreshToken = "r"
    #expect(changed != model)  // part of equality and hashing, like every other field
    #expect(Set([model, changed]).count == 2)
  }

  @Test func noPrintedFormOfAModelContainsEitherToken() {
    let model = withRefresh
    var dumped = ""
    dump(model, to: &dumped)
    var dumpedNested = ""
    dump([key(7): model], to: &dumpedNested)
    let forms: [(String, String)] = [
      ("String(describing:)", String(describing: model)),
      ("String(reflecting:)", String(reflecting: model)),
      ("interpolation", "model: \(model)"),
      ("description", model.description),
      ("debugDescription", model.debugDescription),
      ("dump", dumped),
      ("dump of a dictionary", dumpedNested),
      ("Optional", String(describing: Optional(model))),
      ("array", "\([model])"),
      ("dictionary", String(reflecting: [key(7): model])),
      (
        "mirror",
        Mirror(reflecting: model).children.map { "\($0.label ?? ""): \($0.value)" }
          .joined(separator: ", ")
      ),
    ]
    for (name, text) in forms {
      #expect(!text.contains(Self.secret), "\(name) shows the refresh token: \(text)")
      #expect(!text.contains(Self.access), "\(name) shows the access token: \(text)")
      #expect(!text.contains("RT-7f3a9c"), "\(name) shows part of the refresh token")
    }
  }

  @Test func aPresentRefreshTokenIsShownOnlyAsItsLength() throws {
    let bytes = Self.secret.utf8.count
    #expect(withRefresh.description.contains("refreshToken: <redacted \(bytes) bytes>"))
    #expect(withRefresh.debugDescription == withRefresh.description)
    let children = Mirror(reflecting: withRefresh).children
    let reflected = children.first { $0.label == "refreshToken" }?.value as? String?
    #expect(reflected == .some("<redacted \(bytes) bytes>"))
    // Without one, the description says nothing about it and reflection shows nil.
    #expect(!withoutRefresh.description.contains("refreshToken"))
    let absent = Mirror(reflecting: withoutRefresh).children.first { $0.label == "refreshToken" }
    let absentValue = try #require(absent?.value)
    #expect(String(describing: absentValue) == "nil")
  }

  @Test func codableModelWithoutTheFieldDecodesWithNoRefreshToken() throws {
    let old = #"{"uid":"1","accessToken":"t","mcUid":"u","extraInfo":{}}"#
    let decoded = try JSONDecoder().decode(AuthModel.self, from: Data(old.utf8))
    #expect(decoded == AuthModel(uid: "1", accessToken: "t", mcUid: "u"))
    let again = try JSONDecoder().decode(
      AuthModel.self, from: JSONEncoder().encode(withRefresh))
    #expect(again == withRefresh)
  }

  // MARK: - The stores

  @Test func inMemoryStoreRoundTripsWithAndWithoutRefreshToken() async {
    let store = InMemoryTokenStore()
    await store.save(withRefresh, for: key(7))
    await store.save(withoutRefresh, for: key(8))
    #expect(await store.model(for: key(7)) == withRefresh)
    #expect(await store.model(for: key(7))?.refreshToken == Self.secret)
    #expect(await store.model(for: key(8)) == withoutRefresh)
    #expect(await store.model(for: key(8))?.refreshToken == nil)
  }

  @Test func fileStoreRoundTripsWithAndWithoutRefreshToken() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let store = FileTokenStore(url: dir.file())
    try await store.save(withRefresh, for: key(7))
    try await store.save(withoutRefresh, for: key(8))
    let reopened = FileTokenStore(url: dir.file())
    #expect(try await reopened.loadAll() == [key(7): withRefresh, key(8): withoutRefresh])
    #expect(try await reopened.model(for: key(7))?.refreshToken == Self.secret)
    #expect(try await reopened.model(for: key(8))?.refreshToken == nil)
    // Removing the token is a change that is written too.
    var cleared = withRefresh
    cleared.refreshToken = nil
    try await store.save(cleared, for: key(7))
    #expect(try await FileTokenStore(url: dir.file()).model(for: key(7)) == cleared)
  }

  // MARK: - The file format

  @Test func formatVersion2WritesTheRefreshTokenOnlyWhenPresent() throws {
    let data = try StoreFileFormat.encode([key(7): withRefresh, key(8): withoutRefresh])
    let (header, body) = try split(data)
    #expect(header["version"] as? Int == 2)
    let entries = try #require(body["entries"] as? [[String: Any]])
    let stored = try entries.map { try #require($0["model"] as? [String: Any]) }
    #expect(stored.map { $0["refreshToken"] as? String } == [Self.secret, nil])
    #expect(stored[1].keys.contains("refreshToken") == false)
    #expect(try StoreFileFormat.decode(data) == [key(7): withRefresh, key(8): withoutRefresh])
  }

  @Test func checkedInVersion1FileReadsWithNoRefreshTokens() throws {
    let data = try Data(contentsOf: fixture("version1.store"))
    let (header, _) = try split(data)
    #expect(header["version"] as? Int == 1)
    #expect(try StoreFileFormat.decode(data) == Self.version1Models)
  }

  @Test func version1FileInAFileStoreReadsAndIsUpgradedOnTheNextSave() async throws {
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    let original = try Data(contentsOf: fixture("version1.store"))
    try original.writePrivately(to: dir.file())
    let issues = IssueLog()
    let store = FileTokenStore(url: dir.file(), onIssue: issues.handler)
    #expect(try await store.loadAll() == Self.version1Models)
    try await store.validate()
    #expect(try Data(contentsOf: dir.file()) == original)  // reading never rewrites
    try await store.save(withRefresh, for: key(7))
    let (header, _) = try split(Data(contentsOf: dir.file()))
    #expect(header["version"] as? Int == 2)
    var expected = Self.version1Models
    expected[key(7)] = withRefresh
    #expect(try await FileTokenStore(url: dir.file()).loadAll() == expected)
    #expect(issues.all.isEmpty)
  }

  @Test func aRefreshTokenFieldInAVersion1FileIsIgnored() throws {
    // A version-1 reader ignores unknown fields, so a stray field in a version-1 file means
    // nothing; the version-2 reader agrees. (The version is not covered by the checksum.)
    let data = try StoreFileFormat.encode([key(7): withRefresh])
    let text = String(decoding: data, as: UTF8.self)
    let version1 = Data(
      text.replacingOccurrences(of: #""version":2}"#, with: #""version":1}"#).utf8)
    #expect(version1 != data)
    var expected = withRefresh
    expected.refreshToken = nil
    #expect(try StoreFileFormat.decode(version1) == [key(7): expected])
  }

  @Test func version3FileIsUnsupportedEvenWithAValidBody() async throws {
    let data = try StoreFileFormat.encode([key(7): withRefresh])
    let text = String(decoding: data, as: UTF8.self)
    let version3 = Data(
      text.replacingOccurrences(of: #""version":2}"#, with: #""version":3}"#).utf8)
    #expect(version3 != data)
    do {
      _ = try StoreFileFormat.decode(version3)
      Issue.record("a version-3 file decoded")
    } catch {
      #expect(error.code == .unsupportedVersion)
      #expect(error.code.rawValue == "unsupported_version")
      #expect(error.message.contains("version 3") && error.message.contains("up to 2"))
      #expect(!error.description.contains(Self.secret))
    }
    // A file store leaves it alone.
    let dir = try TemporaryDirectory()
    defer { dir.remove() }
    try version3.writePrivately(to: dir.file())
    let store = FileTokenStore(url: dir.file())
    await #expect(throws: TokenStoreError(.unsupportedVersion, "")) {
      try await store.save(withoutRefresh, for: key(8))
    }
    #expect(try Data(contentsOf: dir.file()) == version3)
  }

  // MARK: - Helpers

  /// What `Fixtures/version1.store` holds (written by the version-1 code at commit 4d32f54).
  static let version1Models: [AccountKey: AuthModel] = [
    AccountKey(account: "u1"): AuthModel(
      uid: "2088000000000001", accessToken: "v1-access-token-1", mcUid: "u1",
      expiresAt: Date(timeIntervalSinceReferenceDate: 812_345_678.123_456_7),
      extraInfo: ["scene": "pay"]),
    AccountKey(account: "u2", mode: "other"): AuthModel(
      uid: "2088000000000002", accessToken: "v1-access-token-2", mcUid: "u2"),
  ]

  private func fixture(_ name: String) -> URL {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appending(path: "Fixtures").appending(path: name)
  }

  /// The header and body of a store file, as JSON objects.
  private func split(_ data: Data) throws -> (header: [String: Any], body: [String: Any]) {
    let newline = try #require(data.firstIndex(of: UInt8(ascii: "\n")))
    let header = try #require(
      JSONSerialization.jsonObject(with: data[..<newline]) as? [String: Any])
    let body = try #require(
      JSONSerialization.jsonObject(with: data[(newline + 1)...]) as? [String: Any])
    return (header, body)
  }
}
