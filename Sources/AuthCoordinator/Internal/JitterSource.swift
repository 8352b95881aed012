import SyncPrimitives

/// The default source of the silent-refresh policy's jitter (``AuthCoordinator/Configuration/random``):
/// SplitMix64 over one atomic counter, seeded once from the system's generator.
///
/// Jitter only spreads refreshes ahead and retries over time; it needs no cryptographic
/// strength. `Double.random(in:)` asks the system's generator, which on Linux is a `getrandom`
/// system call for every draw, and every model a flight brings draws once (B5 counted 60,000
/// such calls in three repetitions). One atomic add and a few multiplications per draw here,
/// and no lock: draws come once per model a flight brings, far below a rate at which the
/// counter's word would be contended.
enum JitterSource {
  private static let state: AtomicCounter = {
    var system = SystemRandomNumberGenerator()
    return AtomicCounter(system.next())
  }()

  /// A number in `0..<1`.
  @Sendable static func next() -> Double {
    var z = state.add(0x9E37_79B9_7F4A_7C15)
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    z ^= z >> 31
    // The top 53 bits: every value a multiple of 2^-53, below 1.
    return Double(z >> 11) * 0x1.0p-53
  }
}
