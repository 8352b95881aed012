import Foundation
import Testing

@testable import TokenStore

// A model expiry in a store file must be a date some server could have given: finite, from 1970
// to `Date.distantFuture`. Anything else (1e300 seconds, before 1970) makes the file corrupt,
// and the encoder refuses to write it, so the store never writes what it would reject.

@Suite(.timeLimit(.minutes(2))) struct StoreExpiryRangeTests {
  @Test(arguments: ["1e300", "-1e300", "1.7976931348623157e308", "-978307201", "63113904001"])
  func anOutOfRangeExpiryIsACorruptFile(_ expiresAt: String) {
    #expect(decodeError(file(expiresAt: expiresAt))?.code == .corruptFile)
  }

  @Test(arguments: [
    "-978307200",  // 1970-01-01T00:00:00Z
    "0", "812345678.25",
    "63113904000",  // Date.distantFuture
  ])
  func anInRangeExpiryDecodes(_ expiresAt: String) {
    #expect(decodeError(file(expiresAt: expiresAt)) == nil)
  }

  @Test(arguments: [1e300, -1e300, -978_307_201, 63_113_904_001])
  func anOutOfRangeExpiryFailsToEncode(_ seconds: Double) {
    let model = AuthModel(
      uid: "1", accessToken: "secret-token", mcUid: "u",
      expiresAt: Date(timeIntervalSinceReferenceDate: seconds))
    do {
      _ = try StoreFileFormat.encode([AccountKey(account: "u"): model])
      Issue.record("encoding an expiry of \(seconds) s succeeded")
    } catch {
      #expect(error.code == .encodingFailed)
      #expect(!error.description.contains("secret-token"))
    }
  }

  /// A correctly framed version-2 file with one model expiring at `expiresAt`.
  private func file(expiresAt: String) -> Data {
    let body = Data(
      (#"{"entries":[{"key":{"mcUid":"u","mode":"platformOnly"},"model":{"accessToken":"t","#
        + #""expiresAt":"# + expiresAt + #","extraInfo":{},"mcUid":"u","uid":"1"}}]}"#
        + "\n").utf8)
    let crc = String(CRC32.checksum(body), radix: 16)
    let header =
      #"{"crc32":""# + String(repeating: "0", count: 8 - crc.count) + crc
      + #"","format":"authcoordinator.tokenstore","length":\#(body.count),"version":2}"#
    return Data((header + "\n").utf8) + body
  }

  private func decodeError(_ data: Data) -> TokenStoreError? {
    do {
      _ = try StoreFileFormat.decode(data)
      return nil
    } catch {
      return error
    }
  }
}
