import Foundation

/// The on-disk format of a ``FileTokenStore``: pure functions from models to bytes and back.
///
/// A file is a one-line JSON header, a newline, and a body of exactly `length` bytes:
///
/// ```text
/// {"crc32":"5d3c2b1a","format":"authcoordinator.tokenstore","length":171,"version":2}
/// {"entries":[{"key":{"mcUid":"u1","mode":"platformOnly"},"model":{...}}]}
/// ```
///
/// - The header is a JSON object on the first line. Every version, present and future, keeps
///   `format` and `version` there, so an old reader can always tell a newer file from garbage.
/// - `length` is the body's size in bytes (including its final newline) and `crc32` the
///   CRC-32 (IEEE) of those bytes as eight lowercase hex digits. A short body is a truncated
///   file; extra bytes or a checksum mismatch make the file corrupt. Nothing is half-read.
/// - The body is `{"entries":[{"key":{...},"model":{...}}]}`, entries sorted by key; an entry
///   written by a fenced save has its `fence`, and a file that keeps revoked fences
///   (``RevokedFences``) has `"revoked":[{"fence":7,"mcUid":"u1"}]` (sorted by account) and
///   `"revokedAll":9`, each absent when empty. An older reader of the same version ignores
///   both (and drops them on its next write). A model's
///   `expiresAt` is seconds since 2001-01-01T00:00:00Z (Foundation's reference date), so a
///   `Date` survives the round trip bit for bit; it is absent when the model has no expiry.
///   Likewise `refreshToken` is absent when the model has none.
///
/// Versions: 1 has no refresh token; 2 adds the optional `refreshToken`. This code writes
/// version 2 and reads both (a version-1 model has no refresh token).
///
/// The functions do no I/O, so the decoder can be fuzzed on its own (see `Fuzz/StoreDecoder`).
package enum StoreFileFormat {
  /// The `format` value of the header.
  package static let formatName = "authcoordinator.tokenstore"
  /// The version this code writes and the newest it reads.
  ///
  /// Version 2 only adds the optional `refreshToken` to a model, which a version-1 reader would
  /// decode without complaint: it ignores unknown fields. That is exactly why the version goes
  /// up. A version-1 reader (an older app, or an extension not yet updated, sharing the file)
  /// would drop the refresh token on decoding and then, on its next save, write the file back
  /// without it: every stored refresh token silently lost. Seeing version 2 it instead reports
  /// `unsupported_version` and refuses to replace the file, so the token survives.
  package static let currentVersion = 2
  /// A header longer than this is not looked for: the file is corrupt.
  package static let maximumHeaderLength = 1024

  // MARK: - Wire types (decoupled from the public model so a rename cannot change the format)

  private struct Header: Codable {
    var format: String
    var version: Int
    var length: Int?
    var crc32: String?
  }

  private struct Body: Codable {
    var entries: [Entry]
    /// The revoked fences of accounts (``RevokedFences``), sorted by account; absent when
    /// there is none. An older reader ignores them (and drops them on its next write, which
    /// lets a save under a revoked grant land until the coordinator's check undoes it, but
    /// loses no model).
    var revoked: [RevokedFence]?
    /// Everyone's revoked fence; absent when there is none.
    var revokedAll: UInt64?
  }

  private struct RevokedFence: Codable {
    /// The account, under the wire name keys use.
    var mcUid: String
    var fence: UInt64
  }

  private struct Entry: Codable {
    var key: StoredKey
    var model: StoredModel
    /// The fence of the fenced save that wrote the model (``FencedTokenStore``); absent for
    /// an ordinary save. An older reader ignores it (and drops it on its next write, which
    /// weakens the fence check until the next fenced save, but loses no model).
    var fence: UInt64?
  }

  /// What a file holds: the models, the fence each was saved with, if any, and the sign-out
  /// marks.
  package struct Contents: Equatable, Sendable {
    package var models: [AccountKey: AuthModel]
    package var fences: [AccountKey: UInt64]
    package var revoked: RevokedFences

    package init(
      models: [AccountKey: AuthModel] = [:], fences: [AccountKey: UInt64] = [:],
      revoked: RevokedFences = RevokedFences()
    ) {
      self.models = models
      self.fences = fences
      self.revoked = revoked
    }
  }

  private struct StoredKey: Codable {
    /// The account, under the wire name files already hold.
    var mcUid: String
    var mode: String
  }

  private struct StoredModel: Codable {
    var uid: String
    var accessToken: String
    var mcUid: String
    var expiresAt: Double?
    var extraInfo: [String: String]
    /// Since version 2; absent when the model has none.
    var refreshToken: String?
  }

  /// Whether a model may expire at `seconds` (since 2001-01-01): a finite date from 1970 to
  /// `Date.distantFuture` (the year 4001, a common "never"), both included. No server's
  /// `expires_in` gives anything else, and within this range every conversion of the date (to
  /// an integer, a `Duration`) is exact and cannot trap. Anything else in a file makes it
  /// ``TokenStoreError/Code/corruptFile``; the encoder refuses it.
  package static func isStorableExpiry(_ seconds: Double) -> Bool {
    seconds.isFinite && seconds >= -Date.timeIntervalBetween1970AndReferenceDate
      && seconds <= Date.distantFuture.timeIntervalSinceReferenceDate
  }

  // MARK: - Encoding

  /// Encodes `models` as a complete file, header included.
  ///
  /// - Parameter models: What to store.
  /// - Returns: The file's bytes.
  /// - Throws: ``TokenStoreError/Code/encodingFailed`` when a model cannot be represented
  ///   (for example an expiry date that is not finite, or outside ``isStorableExpiry(_:)``).
  package static func encode(
    _ models: [AccountKey: AuthModel], fences: [AccountKey: UInt64] = [:],
    revoked: RevokedFences = RevokedFences()
  ) throws(TokenStoreError) -> Data {
    for model in models.values {
      if let expiresAt = model.expiresAt,
        !isStorableExpiry(expiresAt.timeIntervalSinceReferenceDate)
      {
        throw TokenStoreError(
          .encodingFailed,
          "A model's expiry date is not storable (non-finite, before 1970 or after 4000).")
      }
    }
    let entries = models.sorted { lhs, rhs in
      (lhs.key.account, lhs.key.mode.rawValue) < (rhs.key.account, rhs.key.mode.rawValue)
    }.map { key, model in
      Entry(
        key: StoredKey(mcUid: key.account, mode: key.mode.rawValue),
        model: StoredModel(
          uid: model.uid,
          accessToken: model.accessToken,
          mcUid: model.mcUid,
          expiresAt: model.expiresAt?.timeIntervalSinceReferenceDate,
          extraInfo: model.extraInfo,
          refreshToken: model.refreshToken
        ),
        fence: fences[key]
      )
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    do {
      let marks = revoked.accounts.sorted { $0.key < $1.key }.map {
        RevokedFence(mcUid: $0.key, fence: $0.value)
      }
      var body = try encoder.encode(
        Body(
          entries: entries, revoked: marks.isEmpty ? nil : marks,
          revokedAll: revoked.all == 0 ? nil : revoked.all))
      body.append(UInt8(ascii: "\n"))
      let header = Header(
        format: formatName,
        version: currentVersion,
        length: body.count,
        crc32: hex(CRC32.checksum(body))
      )
      var file = try encoder.encode(header)
      file.append(UInt8(ascii: "\n"))
      file.append(body)
      return file
    } catch {
      // The encoder's error may quote the offending value; keep only its kind.
      throw TokenStoreError(.encodingFailed, "The models could not be encoded as JSON.")
    }
  }

  // MARK: - Decoding

  /// Decodes a complete file.
  ///
  /// Never traps, whatever the bytes: every problem is a thrown error.
  ///
  /// - Parameter data: The file's bytes.
  /// - Returns: The stored models by key.
  /// - Throws: ``TokenStoreError/Code/truncatedFile`` when the file is empty or ends early,
  ///   ``TokenStoreError/Code/unsupportedVersion`` when a newer version wrote it, and
  ///   ``TokenStoreError/Code/corruptFile`` for anything else that is not a valid file.
  package static func decode(_ data: Data) throws(TokenStoreError) -> [AccountKey: AuthModel] {
    try decodeContents(data).models
  }

  /// Decodes a complete file with the fences of its models (see ``decode(_:)``).
  ///
  /// - Parameter data: The file's bytes.
  /// - Returns: The stored models and fences by key.
  /// - Throws: As ``decode(_:)`` does.
  package static func decodeContents(_ data: Data) throws(TokenStoreError) -> Contents {
    guard !data.isEmpty else {
      throw TokenStoreError(.truncatedFile, "The file is empty.")
    }
    let headerEnd = data.prefix(maximumHeaderLength + 1).firstIndex(of: UInt8(ascii: "\n"))
    guard let headerEnd else {
      if data.count <= maximumHeaderLength && data.first == UInt8(ascii: "{") {
        throw TokenStoreError(.truncatedFile, "The file ends inside its header.")
      }
      throw TokenStoreError(.corruptFile, "The file has no token-store header.")
    }
    let decoder = JSONDecoder()
    let header: Header
    do {
      header = try decoder.decode(Header.self, from: data[data.startIndex..<headerEnd])
    } catch {
      throw TokenStoreError(.corruptFile, "The file's header is not valid.")
    }
    guard header.format == formatName else {
      throw TokenStoreError(.corruptFile, "The file is not a token-store file.")
    }
    guard header.version <= currentVersion else {
      throw TokenStoreError(
        .unsupportedVersion,
        "The file has format version \(header.version); this code reads up to "
          + "\(currentVersion)."
      )
    }
    guard header.version >= 1, let length = header.length, length >= 0,
      let crcText = header.crc32, let expectedCRC = parseHex(crcText)
    else {
      throw TokenStoreError(.corruptFile, "The file's header is incomplete.")
    }
    let body = data[(headerEnd + 1)...]
    guard body.count >= length else {
      throw TokenStoreError(
        .truncatedFile,
        "The file's body has \(body.count) of the \(length) bytes its header announces."
      )
    }
    guard body.count == length else {
      throw TokenStoreError(
        .corruptFile,
        "The file has \(body.count - length) bytes after the body its header announces."
      )
    }
    guard CRC32.checksum(body) == expectedCRC else {
      throw TokenStoreError(.corruptFile, "The file's checksum does not match its body.")
    }
    let decoded: Body
    do {
      decoded = try decoder.decode(Body.self, from: body)
    } catch {
      // The decoder's error may quote stored values; keep only its kind.
      throw TokenStoreError(.corruptFile, "The file's entries are not valid.")
    }
    var models: [AccountKey: AuthModel] = [:]
    var fences: [AccountKey: UInt64] = [:]
    for entry in decoded.entries {
      let key = AccountKey(account: entry.key.mcUid, mode: AuthMode(rawValue: entry.key.mode))
      var expiresAt: Date?
      if let seconds = entry.model.expiresAt {
        guard isStorableExpiry(seconds) else {
          throw TokenStoreError(.corruptFile, "An entry has an invalid expiry date.")
        }
        expiresAt = Date(timeIntervalSinceReferenceDate: seconds)
      }
      let model = AuthModel(
        uid: entry.model.uid,
        accessToken: entry.model.accessToken,
        mcUid: entry.model.mcUid,
        expiresAt: expiresAt,
        extraInfo: entry.model.extraInfo,
        // Version 1 has no refresh token; a stray field there is ignored, as a version-1
        // reader does.
        refreshToken: header.version >= 2 ? entry.model.refreshToken : nil
      )
      guard models.updateValue(model, forKey: key) == nil else {
        throw TokenStoreError(.corruptFile, "The file holds the same key twice.")
      }
      fences[key] = entry.fence
    }
    var marks: [String: UInt64] = [:]
    for mark in decoded.revoked ?? [] {
      guard marks.updateValue(mark.fence, forKey: AccountKey.normalized(mark.mcUid)) == nil else {
        throw TokenStoreError(.corruptFile, "The file marks the same account twice.")
      }
    }
    return Contents(
      models: models, fences: fences,
      revoked: RevokedFences(accounts: marks, all: decoded.revokedAll ?? 0))
  }

  // MARK: - Helpers

  private static func hex(_ value: UInt32) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 8 - digits.count) + digits
  }

  private static func parseHex(_ text: String) -> UInt32? {
    guard text.utf8.count == 8,
      text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
    else { return nil }
    return UInt32(text, radix: 16)
  }
}
