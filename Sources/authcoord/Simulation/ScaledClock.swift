/// A clock whose time runs `speedup` times faster than real time, so that the demo can show
/// minutes-long deadlines in a fraction of a second. Sleeps are real (scaled) sleeps.
struct ScaledClock: Clock {
  struct Instant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
    func duration(to other: Instant) -> Duration { other.offset - offset }
    static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
  }

  let speedup: Int
  private let base = ContinuousClock()
  private let origin: ContinuousClock.Instant

  init(speedup: Int) {
    self.speedup = speedup
    self.origin = base.now
  }

  var now: Instant { Instant(offset: origin.duration(to: base.now) * speedup) }
  var minimumResolution: Duration { .zero }

  func sleep(until deadline: Instant, tolerance: Duration?) async throws {
    let remaining = now.duration(to: deadline)
    guard remaining > .zero else { return }
    try await base.sleep(for: remaining / speedup)
  }
}
