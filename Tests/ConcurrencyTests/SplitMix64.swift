/// A small, fast, deterministic random number generator (SplitMix64, Steele, Lea and Flood 2014).
///
/// The stress tests draw every decision from one of these, so a seed printed by a failing run
/// replays the same script of operations, parameters and faults.
struct SplitMix64: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    return Self.mix(state)
  }

  /// The SplitMix64 finaliser: a good 64-bit hash of `value`.
  static func mix(_ value: UInt64) -> UInt64 {
    var z = value
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// A stable hash of several values, for decisions that must not depend on scheduling
  /// (such as "what does the n-th authorization of key k do").
  static func hash(_ values: UInt64...) -> UInt64 {
    var h: UInt64 = 0x243F_6A88_85A3_08D3
    for value in values { h = mix(h ^ mix(value)) }
    return h
  }

  /// A hash of a string that, unlike `hashValue`, is the same in every process.
  static func hash(string: String) -> UInt64 {
    var h: UInt64 = 0xCBF2_9CE4_8422_2325  // FNV-1a
    for byte in string.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return mix(h)
  }

  /// True with probability `percent` / 100.
  mutating func chance(_ percent: Double) -> Bool {
    Double.random(in: 0..<100, using: &self) < percent
  }
}
