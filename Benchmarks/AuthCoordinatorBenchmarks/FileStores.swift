import AuthCoordinator
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// How B6 builds a `FileTokenStore` for a file URL (nil would leave it out of B6 and measure
/// the two references only).
let makeFileTokenStore: (@Sendable (URL) throws -> any TokenStore)? = { FileTokenStore(url: $0) }

/// B6's implementations, each keeping one file of models.
enum FileStoreKind: String, CaseIterable, Sendable {
  /// The package's store (durable, atomic), when available.
  case fileTokenStore = "FileTokenStore"
  /// The ratio's denominator: encode and overwrite in place, no fsync, no atomic replace.
  case plainWrite = "plain write"
  /// The durability floor: temporary file, fsync, rename, fsync of the directory.
  case durableWrite = "atomic+fsync"

  static var available: [FileStoreKind] {
    allCases.filter { $0 != .fileTokenStore || makeFileTokenStore != nil }
  }

  func make(_ url: URL) throws -> any TokenStore {
    switch self {
    case .fileTokenStore:
      guard let makeFileTokenStore else { throw HarnessFailure(description: "no FileTokenStore") }
      return try makeFileTokenStore(url)
    case .plainWrite: return PlainFileStore(url: url, durable: false)
    case .durableWrite: return PlainFileStore(url: url, durable: true)
    }
  }
}

/// A minimal JSON file store: the models live in memory and every save writes the whole file;
/// every load reads and decodes it. `durable` picks an atomic, fsynced replace over a plain
/// overwrite.
final class PlainFileStore: TokenStore {
  private let url: URL
  private let durable: Bool
  private let models = LockedState<[String: AuthModel]>([:])

  init(url: URL, durable: Bool) {
    self.url = url
    self.durable = durable
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    guard let data = try? Data(contentsOf: url) else { return nil }
    return try JSONDecoder().decode([String: AuthModel].self, from: data)[key.description]
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    let snapshot = models.withLock { models in
      models[key.description] = model
      return models
    }
    try replaceFile(with: JSONEncoder().encode(snapshot))
  }

  func removeModels(forAccount account: String) async throws {
    let snapshot = models.withLock { models in
      models = models.filter { !$0.key.hasPrefix(account + "/") }
      return models
    }
    try replaceFile(with: JSONEncoder().encode(snapshot))
  }

  func removeAll() async throws {
    models.withLock { $0.removeAll() }
    try replaceFile(with: JSONEncoder().encode([String: AuthModel]()))
  }

  private func replaceFile(with data: Data) throws {
    guard durable else {
      try data.write(to: url)
      return
    }
    let temporary = url.deletingLastPathComponent()
      .appendingPathComponent(".\(url.lastPathComponent).\(UUID().uuidString).tmp")
    try Self.writeSynced(data, to: temporary.path)
    guard rename(temporary.path, url.path) == 0 else {
      throw HarnessFailure(description: "rename failed: errno \(errno)")
    }
    let directory = open(url.deletingLastPathComponent().path, O_RDONLY)
    if directory >= 0 {
      _ = fsync(directory)
      _ = close(directory)
    }
  }

  private static func writeSynced(_ data: Data, to path: String) throws {
    let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard descriptor >= 0 else { throw HarnessFailure(description: "open failed: errno \(errno)") }
    defer { _ = close(descriptor) }
    let written = data.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
    guard written == data.count, fsync(descriptor) == 0 else {
      throw HarnessFailure(description: "write failed: errno \(errno)")
    }
  }
}
