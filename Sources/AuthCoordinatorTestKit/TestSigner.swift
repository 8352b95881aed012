import Foundation

/// A deterministic, keyed, NON-cryptographic checksum that stands in for Alipay's RSA2
/// signature in tests.
///
/// > Important: This is **not RSA2** and not a signature of any kind: anyone who knows the key
/// > can forge it, and it is not even a secure MAC. It is a stand-in so tests can tell signed
/// > requests from forged or unsigned ones. Never use it outside tests.
///
/// ```swift
/// let signer = TestSigner(key: "test-key")
/// let gateway = SimulatedAlipayGateway(appID: "2021000000000001", verifier: signer.verify)
/// let api = AlipayTokenAPI(appID: "2021000000000001", transport: gateway) { signer.sign($0) }
/// ```
public struct TestSigner: Sendable, Hashable {
  /// The key mixed into the checksum.
  public var key: String

  /// Creates a signer.
  ///
  /// - Parameter key: The key; two signers with different keys produce different checksums.
  public init(key: String) { self.key = key }

  /// The checksum of `content`, Base64-encoded (so it looks like, and travels like, a `sign`).
  ///
  /// - Parameter content: The sign content.
  /// - Returns: Sixteen bytes of FNV-1a checksums over the key and the content, in Base64.
  public func sign(_ content: String) -> String {
    var first: UInt64 = 0xcbf2_9ce4_8422_2325
    var second: UInt64 = 0x8422_2325_cbf2_9ce4
    for byte in Array(key.utf8) + [0] + Array(content.utf8) {
      first = (first ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
      second = (second ^ UInt64(byte ^ 0x5a)) &* 0x0000_0100_0000_01b3
    }
    var bytes: [UInt8] = []
    for word in [first, second] {
      for shift in stride(from: 56, through: 0, by: -8) {
        bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift)))
      }
    }
    return Data(bytes).base64EncodedString()
  }

  /// Whether `signature` is the checksum of `content` under this key.
  ///
  /// - Parameters:
  ///   - content: The sign content.
  ///   - signature: The `sign` received.
  /// - Returns: `true` when they match.
  public func verify(_ content: String, _ signature: String) -> Bool {
    sign(content) == signature
  }
}
