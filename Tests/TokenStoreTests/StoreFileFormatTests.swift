import Foundation
import Testing

@testable import TokenStore

@Suite(.timeLimit(.minutes(2))) struct StoreFileFormatTests {
  let models: [AccountKey: AuthModel] = [
    key(1): sampleModel(1),
    key(2): sampleModel(2, expires: false),
    AccountKey(account: "u1", mode: "future-mode"): sampleModel(3),
    AccountKey(account: "üñí\"\n\\/", mode: "platformOnly"): AuthModel(
      uid: "2088", accessToken: "a\"b\\c\n\u{0}", mcUid: "x", extraInfo: ["k\n": "v\u{1F600}"]),
  ]

  @Test func crc32MatchesTheStandardCheckValue() {
    #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    #expect(CRC32.checksum([UInt8]()) == 0)
  }

  @Test func roundTripIsExactIncludingDates() throws {
    let data = try StoreFileFormat.encode(models)
    #expect(try StoreFileFormat.decode(data) == models)
    // Dates survive bit for bit, not merely to the millisecond.
    let odd = Date(timeIntervalSinceReferenceDate: 812_345_678.123_456_789_1)
    let one = [key(1): AuthModel(uid: "1", accessToken: "t", mcUid: "u1", expiresAt: odd)]
    let decoded = try StoreFileFormat.decode(StoreFileFormat.encode(one))
    #expect(
      decoded[key(1)]?.expiresAt?.timeIntervalSinceReferenceDate
        == odd.timeIntervalSinceReferenceDate)
  }

  @Test func encodingIsDeterministic() throws {
    #expect(try StoreFileFormat.encode(models) == StoreFileFormat.encode(models))
    #expect(try StoreFileFormat.decode(StoreFileFormat.encode([:])).isEmpty)
  }

  @Test func fileIsAVersionedHeaderLineFollowedByTheBody() throws {
    let data = try StoreFileFormat.encode(models)
    let newline = try #require(data.firstIndex(of: UInt8(ascii: "\n")))
    let header = try #require(
      JSONSerialization.jsonObject(with: data[..<newline]) as? [String: Any])
    #expect(header["format"] as? String == "authcoordinator.tokenstore")
    #expect(header["version"] as? Int == 2)
    let body = data[(newline + 1)...]
    #expect(header["length"] as? Int == body.count)
    let crc = String(CRC32.checksum(body), radix: 16)
    #expect(header["crc32"] as? String == String(repeating: "0", count: 8 - crc.count) + crc)
    let parsed = try #require(JSONSerialization.jsonObject(with: body) as? [String: Any])
    let entries = try #require(parsed["entries"] as? [[String: Any]])
    #expect(entries.count == models.count)
    #expect(body.last == UInt8(ascii: "\n"))
  }

  @Test func everyTruncationIsDetected() throws {
    let data = try StoreFileFormat.encode([key(1): sampleModel(1), key(2): sampleModel(2)])
    for length in 0..<data.count {
      let prefix = data.prefix(length)
      #expect(throws: TokenStoreError.self, "prefix of \(length) bytes") {
        try StoreFileFormat.decode(prefix)
      }
      let code = decodeError(prefix)?.code
      #expect(code == .truncatedFile, "prefix of \(length) bytes gave \(String(describing: code))")
    }
  }

  @Test func everySingleByteChangeIsDetected() throws {
    let data = try StoreFileFormat.encode([key(1): sampleModel(1)])
    for index in data.indices {
      for flip: UInt8 in [0x01, 0x20, 0x80] {
        var changed = data
        changed[index] ^= flip
        let error = decodeError(changed)
        #expect(error != nil, "byte \(index) ^ \(flip) was accepted")
      }
    }
  }

  @Test func trailingBytesAreCorrupt() throws {
    var data = try StoreFileFormat.encode(models)
    data.append(contentsOf: Array("\n".utf8))
    #expect(decodeError(data)?.code == .corruptFile)
  }

  @Test func randomBytesNeverDecode() throws {
    var generator = SeededGenerator(seed: testSeed("randomBytesNeverDecode"))
    for _ in 0..<2000 {
      let count = Int.random(in: 0...600, using: &generator)
      var data = randomBytes(count, using: &generator)
      if Bool.random(using: &generator), !data.isEmpty {
        data[0] = UInt8(ascii: "{")  // look a little like JSON
      }
      let error = decodeError(data)
      #expect(error?.code == .corruptFile || error?.code == .truncatedFile)
    }
  }

  @Test func newerVersionIsUnsupportedWhateverItsBody() {
    let newer = Data(
      #"{"format":"authcoordinator.tokenstore","version":3,"layout":"something new"}"#.utf8
        + [UInt8(ascii: "\n")] + Array("binary\u{0}stuff".utf8))
    #expect(decodeError(newer)?.code == .unsupportedVersion)
    #expect(decodeError(newer)?.message.contains("version 3") == true)
  }

  @Test func malformedHeadersAreCorrupt() throws {
    let cases = [
      #"{"format":"something.else","version":1,"length":0,"crc32":"00000000"}"#,
      #"{"format":"authcoordinator.tokenstore","version":0,"length":0,"crc32":"00000000"}"#,
      #"{"format":"authcoordinator.tokenstore","version":1,"crc32":"00000000"}"#,
      #"{"format":"authcoordinator.tokenstore","version":1,"length":0}"#,
      #"{"format":"authcoordinator.tokenstore","version":1,"length":-1,"crc32":"00000000"}"#,
      #"{"format":"authcoordinator.tokenstore","version":1,"length":0,"crc32":"0000000"}"#,
      #"{"format":"authcoordinator.tokenstore","version":1,"length":0,"crc32":"0000000G"}"#,
      #"{"format":"authcoordinator.tokenstore","version":"1","length":0,"crc32":"00000000"}"#,
      #"["format"]"#,
      "not json at all",
    ]
    for header in cases {
      let data = Data((header + "\n").utf8)
      #expect(decodeError(data)?.code == .corruptFile, "\(header)")
    }
    #expect(decodeError(Data("plain text without newline".utf8))?.code == .corruptFile)
    #expect(decodeError(Data(repeating: UInt8(ascii: "{"), count: 5000))?.code == .corruptFile)
  }

  @Test func validChecksumOverInvalidEntriesIsCorrupt() {
    for body in [#"{"entries":[{"key":{}}]}"#, "[]", #"{"entries":null}"#, "\u{FF}\u{FE}"] {
      #expect(decodeError(frame(Data(body.utf8)))?.code == .corruptFile, "\(body)")
    }
    let entry =
      #"{"key":{"mcUid":"u","mode":"m"},"#
      + #""model":{"uid":"1","accessToken":"t","mcUid":"u","extraInfo":{}}}"#
    let duplicate = #"{"entries":["# + entry + "," + entry + "]}"
    #expect(decodeError(frame(Data(duplicate.utf8)))?.code == .corruptFile)
    let single = #"{"entries":["# + entry + "]}"
    #expect(decodeError(frame(Data(single.utf8))) == nil)
  }

  @Test func unrepresentableDatesFailToEncode() {
    let bad = AuthModel(
      uid: "1", accessToken: "secret-token", mcUid: "u",
      expiresAt: Date(timeIntervalSinceReferenceDate: .infinity))
    do {
      _ = try StoreFileFormat.encode([key(1): bad])
      Issue.record("encoding an infinite date succeeded")
    } catch {
      #expect(error.code == .encodingFailed)
      #expect(!error.description.contains("secret-token"))
    }
  }

  @Test func errorsCompareByCodeAndNeverShowTokens() throws {
    let a = TokenStoreError(.corruptFile, "one", path: "/a")
    let b = TokenStoreError(.corruptFile, "two")
    #expect(a == b)
    #expect(a.hashValue == b.hashValue)
    #expect(a != TokenStoreError(.truncatedFile, "one", path: "/a"))
    #expect(a.description.contains("corrupt_file") && a.description.contains("/a"))
    // Decoding errors never quote the file's content.
    let model = AuthModel(uid: "1", accessToken: "very-secret", mcUid: "u")
    var data = try StoreFileFormat.encode([key(1): model])
    data[data.count - 3] ^= 0x01
    let error = try #require(decodeError(data))
    #expect(!error.description.contains("very-secret"))
  }

  // MARK: - Helpers

  private func decodeError(_ data: Data) -> TokenStoreError? {
    do {
      _ = try StoreFileFormat.decode(data)
      return nil
    } catch {
      return error
    }
  }

  /// A valid header around an arbitrary body.
  private func frame(_ body: Data) -> Data {
    let crc = String(CRC32.checksum(body), radix: 16)
    let padded = String(repeating: "0", count: 8 - crc.count) + crc
    let header =
      #"{"crc32":""# + padded + #"","format":"authcoordinator.tokenstore","length":"#
      + "\(body.count)" + #","version":1}"#
    return Data((header + "\n").utf8) + body
  }
}
