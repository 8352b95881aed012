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

/// A fresh directory under the system's temporary directory, removed by ``remove()``.
struct TemporaryDirectory {
  let url: URL

  init() throws {
    var template = Array((NSTemporaryDirectory() + "/TokenStoreTests.XXXXXX").utf8CString)
    let created = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    guard let created else { throw POSIXErrorDescription(call: "mkdtemp", errno: errno) }
    url = URL(fileURLWithPath: String(cString: created), isDirectory: true)
  }

  /// The URL of `name` inside the directory.
  func file(_ name: String = "tokens.store") -> URL { url.appending(path: name) }

  /// The names of the directory's entries, sorted.
  func contents() throws -> [String] {
    try FileManager.default.contentsOfDirectory(atPath: url.path(percentEncoded: false)).sorted()
  }

  func remove() {
    try? FileManager.default.removeItem(at: url)
  }
}

/// Collects the issues a store reports.
final class IssueLog: Sendable {
  private let issues = Mutex<[TokenStoreError]>([])
  var all: [TokenStoreError] { issues.withLock { $0 } }
  var codes: [TokenStoreError.Code] { all.map(\.code) }
  var handler: @Sendable (TokenStoreError) -> Void {
    { [self] issue in issues.withLock { $0.append(issue) } }
  }
}

/// A tiny lock for test bookkeeping (the library's own lock is package API of another module).
final class Mutex<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value
  init(_ value: Value) { self.value = value }
  func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// The model `store-crasher` writes as its `i`th.
func crasherModel(_ i: Int, mcUid: String) -> AuthModel {
  let digits = String(i)
  let uid = "2088" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
  return AuthModel(uid: uid, accessToken: "tok-\(i)", mcUid: mcUid)
}

/// The index `i` of a model written by `store-crasher`, read back from its token.
func crasherIndex(_ model: AuthModel?) -> Int? {
  guard let model, model.accessToken.hasPrefix("tok-") else { return nil }
  return Int(model.accessToken.dropFirst(4))
}

func sampleModel(_ n: Int = 1, expires: Bool = true) -> AuthModel {
  AuthModel(
    uid: "20880000000000\(n)",
    accessToken: "token-\(n)-\(UUID().uuidString)",
    mcUid: "u\(n)",
    expiresAt: expires ? Date().addingTimeInterval(Double(n) * 3600.123456789) : nil,
    extraInfo: n.isMultiple(of: 2) ? ["scene": "pay", "n": String(n)] : [:]
  )
}

func key(_ n: Int) -> AccountKey { AccountKey(account: "u\(n)") }

/// The permission bits of the file at `url` (not following a symbolic link).
func permissions(_ url: URL) -> mode_t? {
  var info = stat()
  guard lstat(url.path(percentEncoded: false), &info) == 0 else { return nil }
  return info.st_mode & 0o7777
}

/// A deterministic generator (SplitMix64), so a failing random test can be replayed.
struct SeededGenerator: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// A seed from `STORE_TEST_SEED`, or a fresh one; printed so a failure can be replayed.
func testSeed(_ name: String) -> UInt64 {
  let seed =
    ProcessInfo.processInfo.environment["STORE_TEST_SEED"].flatMap { UInt64($0) }
    ?? UInt64.random(in: 0...UInt64.max)
  print("\(name): seed \(seed) (replay with STORE_TEST_SEED=\(seed))")
  return seed
}

func randomBytes(_ count: Int, using generator: inout SeededGenerator) -> Data {
  Data((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
}

#if os(Linux)
  /// Runs `chattr +i` / `chattr -i` on `url`.
  ///
  /// - Returns: Whether chattr succeeded.
  @discardableResult
  func setImmutable(_ url: URL, _ immutable: Bool) -> Bool {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
    process.arguments = [immutable ? "+i" : "-i", url.path(percentEncoded: false)]
    process.standardError = FileHandle.nullDevice
    guard (try? process.run()) != nil else { return false }
    process.waitUntilExit()
    return process.terminationStatus == 0
  }

  /// Whether `chattr +i` on a directory stops this process from creating files in it.
  func immutableDirectoriesWork() -> Bool {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/chattr"),
      let dir = try? TemporaryDirectory()
    else { return false }
    defer { dir.remove() }
    guard setImmutable(dir.url, true) else { return false }
    defer { setImmutable(dir.url, false) }
    return !FileManager.default.createFile(
      atPath: dir.file("probe").path(percentEncoded: false), contents: nil)
  }
#endif

extension Data {
  /// Writes a fixture as the store writes its files (mode 0600): a store file that group or
  /// others may read is made 0600 and reported (`insecurePermissions`), which a test of
  /// something else should not have to expect.
  func writePrivately(to url: URL) throws {
    try write(to: url)
    guard chmod(url.path(percentEncoded: false), 0o600) == 0 else {
      throw CocoaError(.fileWriteNoPermission)
    }
  }
}
