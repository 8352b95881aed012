/// The fleet simulation's generator (SplitMix64): one seed gives the same draws on every run and
/// every platform, which `SystemRandomNumberGenerator` would not.
struct FleetRandom: RandomNumberGenerator {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// True `percent` times in 100.
  mutating func chance(_ percent: Double) -> Bool {
    Double.random(in: 0..<100, using: &self) < percent
  }

  /// A generator for part `part` of the run seeded `seed`, independent of the others' draws.
  static func derived(_ seed: UInt64, _ part: UInt64) -> FleetRandom {
    var mixer = FleetRandom(seed: seed ^ (part &* 0xD6E8_FEB8_6659_FD93))
    return FleetRandom(seed: mixer.next())
  }
}
