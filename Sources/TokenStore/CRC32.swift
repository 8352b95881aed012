/// CRC-32 (IEEE 802.3, reflected polynomial `0xEDB88320`), the checksum of zlib, PNG and
/// `cksum -o 3`, used to detect a garbled token-store file.
package enum CRC32 {
  private static let table: [UInt32] = (0..<256).map { index -> UInt32 in
    var value = UInt32(index)
    for _ in 0..<8 {
      value = (value & 1) != 0 ? (value >> 1) ^ 0xEDB8_8320 : value >> 1
    }
    return value
  }

  /// The CRC-32 of `bytes`.
  ///
  /// - Parameter bytes: The bytes to check.
  /// - Returns: The checksum; `0` for no bytes, `0xCBF43926` for the ASCII digits `1...9`.
  package static func checksum<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt32 {
    var crc: UInt32 = 0xFFFF_FFFF
    table.withUnsafeBufferPointer { table in
      for byte in bytes {
        crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8)
      }
    }
    return crc ^ 0xFFFF_FFFF
  }
}
