// libFuzzer entry point for the token-store file decoder (StoreFileFormat.decode).
//
// Not part of `swift build`: scripts/fuzz-store.sh compiles this file together with the few
// TokenStore sources the decoder needs, with `-sanitize=fuzzer,address`, and runs it.
//
// Properties checked for every input:
//   - decoding never traps, overflows, leaks or reads out of bounds (AddressSanitizer);
//   - a failure is one of the decoder's documented codes;
//   - whatever decodes re-encodes, and the re-encoded file decodes to the same models.
// Each input is decoded twice: as a whole file, and as the body of a file with a valid header
// (right length and CRC-32), so mutations reach the entries decoder instead of being stopped
// by the checksum.

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func storeDecoderFuzzTest(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let data = start.map { Data(bytes: $0, count: count) } ?? Data()
  check(data)
  check(framed(data))
  return 0
}

/// `body` behind a header that announces its real length and checksum, in the current version
/// (so the refresh token, new in version 2, is decoded too).
func framed(_ body: Data) -> Data {
  let crc = String(CRC32.checksum(body), radix: 16)
  let header =
    #"{"crc32":""# + String(repeating: "0", count: 8 - crc.count) + crc
    + #"","format":"authcoordinator.tokenstore","length":\#(body.count),"version":"#
    + "\(StoreFileFormat.currentVersion)}"
  return Data((header + "\n").utf8) + body
}

func check(_ data: Data) {
  let models: [AccountKey: AuthModel]
  do {
    models = try StoreFileFormat.decode(data)
  } catch {
    let expected: [TokenStoreError.Code] = [.corruptFile, .truncatedFile, .unsupportedVersion]
    precondition(expected.contains(error.code), "unexpected decode error code \(error.code)")
    return
  }
  let encoded: Data
  do {
    encoded = try StoreFileFormat.encode(models)
  } catch {
    preconditionFailure("a decoded store failed to encode: \(error.code)")
  }
  do {
    let again = try StoreFileFormat.decode(encoded)
    precondition(again == models, "decode(encode(models)) differs from models")
  } catch {
    preconditionFailure("a re-encoded store failed to decode: \(error.code)")
  }
}
