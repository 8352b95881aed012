import Foundation

/// The coordinators' jitter source, seeded.
final class FleetJitter: @unchecked Sendable {
  private let lock = NSLock()
  private var rng: FleetRandom
  init(_ rng: FleetRandom) { self.rng = rng }
  func next() -> Double { lock.withLock { Double.random(in: 0..<1, using: &rng) } }
}
