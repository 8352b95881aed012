import Foundation

/// What the world does to one simulated process: whether it is paused (every store, lease and
/// token-server operation it begins, and every response it would receive, waits until the pause
/// ends, renewals included, so its grant can lapse), its wall clock's offset, and the faults it
/// suffers. Shared by its store, lease and transport wrappers.
final class FleetProcessState: @unchecked Sendable {
  let index: Int
  private let lock = NSLock()
  private var pausedUntil: Duration = .zero
  private var wallOffset: TimeInterval = 0
  private var rng: FleetRandom
  /// The draws of faults added after the first, from a stream of their own, so that adding
  /// them changed no seed's schedule.
  private var laterRNG: FleetRandom
  /// The draws of hung store and lease operations, from a stream of their own too.
  private var hangRNG: FleetRandom
  /// The draws of failed reads and lease calls and of slow store operations, from another.
  private var storeFaultRNG: FleetRandom
  /// The draws of each change notice's delay, from another.
  private var noticeRNG: FleetRandom
  /// The draws of 429 answers among the server's unavailable ones, from another.
  private var statusRNG: FleetRandom
  private let drawn: FleetFaults
  private var calm = false
  private var afterRemoval: Duration?

  /// The faults the process suffers now: the seed's, until the world calms down.
  var faults: FleetFaults { lock.withLock { calm ? FleetFaults() : drawn } }

  /// The storm is over: no more injected faults (pauses already begun run their course). What
  /// the fleet must do then is converge: every rotation stored, every call answered.
  func calmDown() { lock.withLock { calm = true } }

  let timeToLive: Duration

  init(index: Int, seed: UInt64, faults: FleetFaults, timeToLive: Duration) {
    self.index = index
    self.timeToLive = timeToLive
    rng = FleetRandom.derived(seed, 100 + UInt64(index))
    laterRNG = FleetRandom.derived(seed, 300 + UInt64(index))
    hangRNG = FleetRandom.derived(seed, 500 + UInt64(index))
    storeFaultRNG = FleetRandom.derived(seed, 600 + UInt64(index))
    noticeRNG = FleetRandom.derived(seed, 800 + UInt64(index))
    statusRNG = FleetRandom.derived(seed, 900 + UInt64(index))
    drawn = faults
  }

  /// At a seam (`acquire`: just after a grant; `afterRequest`: after the server rotated, before
  /// the response is back; `renewal`: during a renewal; `save`: just before a save; `removal`:
  /// just after a logout's removal, before its announcement), with the
  /// seed's probability, pauses the process for 0.5-2 times its lease's time to live from now,
  /// and waits it out. Returns whether it paused.
  @discardableResult
  func maybePause(at seam: String, clock: VirtualClock, ledger: FleetLedger) async -> Bool {
    guard
      let length = lock.withLock({ () -> Duration? in
        guard !calm, rng.chance(drawn.seamPauses) else { return nil }
        return timeToLive * Double.random(in: 0.5...2.0, using: &rng)
      })
    else { return false }
    ledger.count("fault: pause at \(seam)")
    if length > timeToLive { ledger.count("fault: pause past the TTL") }
    ledger.note("p\(index) paused at \(seam) for \(length)")
    pause(from: clock.world.now, for: length)
    await gate(clock)
    return true
  }

  /// With the seed's probability, `operation` (a store read or save, a lease acquire, renewal
  /// or grant check) hangs for 10-60 seconds before it runs, far past the coordinator's store
  /// deadline and the lease's time to live: a database or disk that stopped answering. The
  /// wait cannot be cancelled (a hung call ignores its caller), and a pause begun meanwhile
  /// still holds the process after it.
  func maybeHang(_ operation: String, clock: VirtualClock, ledger: FleetLedger) async {
    guard
      let length = lock.withLock({ () -> Duration? in
        guard !calm, drawn.hungOperations > 0, hangRNG.chance(drawn.hungOperations) else {
          return nil
        }
        return .milliseconds(Int.random(in: 10_000...60_000, using: &hangRNG))
      })
    else { return }
    ledger.count("fault: hung \(operation)")
    ledger.note("p\(index)'s \(operation) hangs for \(length)")
    let world = clock.world
    let until = world.now + length
    await Task { try? await world.sleep(until: until) }.value
    await gate(clock)
  }

  /// Whether this process's `operation` (a store read, a lease acquisition or grant check)
  /// fails, with the seed's probability: the store or the lease could not be read.
  func fails(
    _ operation: String, rate: KeyPath<FleetFaults, Double>, ledger: FleetLedger
  ) -> Bool {
    let failed = lock.withLock {
      let chance = calm ? 0 : drawn[keyPath: rate]
      return chance > 0 && storeFaultRNG.chance(chance)
    }
    if failed {
      ledger.count("fault: \(operation) failed")
      ledger.note("p\(index)'s \(operation) failed")
    }
    return failed
  }

  /// With the seed's probability, a store operation takes 0.3-2.5 seconds (a slow disk or
  /// database: around the coordinator's store timeout of 2 seconds), then runs.
  func maybeSlow(_ operation: String, clock: VirtualClock, ledger: FleetLedger) async {
    guard
      let length = lock.withLock({ () -> Duration? in
        guard !calm, drawn.slowStoreOperations > 0,
          storeFaultRNG.chance(drawn.slowStoreOperations)
        else { return nil }
        return .milliseconds(Int.random(in: 300...2_500, using: &storeFaultRNG))
      })
    else { return }
    ledger.count("fault: slow \(operation)")
    let world = clock.world
    let until = world.now + length
    await Task { try? await world.sleep(until: until) }.value
    await gate(clock)
  }

  /// How late the next change notice reaches this process: up to the seed's limit, whether
  /// the world has calmed down or not (the leases are always this late), or `nil` when notices
  /// arrive at once.
  func noticeDelay() -> Duration? {
    guard drawn.noticeDelayLimit > .zero else { return nil }
    let limit = Int(drawn.noticeDelayLimit / .milliseconds(1))
    return lock.withLock { .milliseconds(Int.random(in: 0...limit, using: &noticeRNG)) }
  }

  /// Whether an answer of the token server that says "come back later" is a 429 (too many
  /// requests) rather than a 503, with the seed's share of them.
  func answersTooManyRequests() -> Bool {
    guard drawn.tooManyRequests > 0 else { return false }
    return lock.withLock { statusRNG.chance(drawn.tooManyRequests) }
  }

  /// Pauses the process for `length` just after its next removal of a user's models (a
  /// logout stopped before its announcement).
  func pauseAfterNextRemoval(for length: Duration) {
    lock.withLock { afterRemoval = length }
  }

  /// The pause ``pauseAfterNextRemoval(for:)`` asked for, once.
  func takePauseAfterRemoval() -> Duration? {
    lock.withLock {
      defer { afterRemoval = nil }
      return afterRemoval
    }
  }

  /// The process crashed: it runs nothing more in the run (its gate opens only when the run's
  /// end winds the world down, and then nothing it does is looked at).
  func crash() {
    lock.withLock {
      pausedUntil = .seconds(1_000_000_000)
      crashed = true
    }
  }
  private var crashed = false

  /// Pauses the process from `now` until `now + length` (a later pause end wins).
  func pause(from now: Duration, for length: Duration) {
    lock.withLock { pausedUntil = max(pausedUntil, now + length) }
  }

  func stepWallClock(by seconds: TimeInterval) { lock.withLock { wallOffset += seconds } }
  var wallClockOffset: TimeInterval { lock.withLock { wallOffset } }

  /// Waits while the process is paused, cancelled or not: a stopped process runs nothing. (A
  /// cancellable wait would throw at once for a cancelled task, and the loop would spin.)
  func gate(_ clock: VirtualClock) async {
    while true {
      let (until, crashed) = lock.withLock { (pausedUntil, self.crashed) }
      guard clock.world.now < until else { return }
      let world = clock.world
      await Task { try? await world.sleep(until: until) }.value
      // Only the run's end wakes a crashed process: what it does then is not looked at.
      if crashed { return }
    }
  }

  /// A draw of this process's own generator.
  func draw<T>(_ body: (inout FleetRandom) -> T) -> T { lock.withLock { body(&rng) } }

  /// A draw of the generator of the faults added later (``laterRNG``).
  func drawLater<T>(_ body: (inout FleetRandom) -> T) -> T { lock.withLock { body(&laterRNG) } }
}

/// The faults a seed draws: how often each fires (percent of the operations it applies to).
struct FleetFaults: Sendable, CustomStringConvertible {
  var failedSaves = 0.0
  var failedRenewals = 0.0
  var unavailable = 0.0
  var dropped = 0.0
  var slowReplies = 0.0
  /// Pauses at the seams (``FleetProcessState/maybePause(at:clock:ledger:)``).
  var seamPauses = 0.0
  /// Token-server outages (``FleetOutage``), per operation.
  var outages = 0.0
  /// Replies garbled after the server answered 200 (it rotated; the client cannot read the new
  /// tokens), per token request.
  var garbledReplies = 0.0
  /// Store and lease operations that hang (``FleetProcessState/maybeHang(_:clock:ledger:)``),
  /// per operation.
  var hungOperations = 0.0
  /// Store reads that fail, per read.
  var failedReads = 0.0
  /// Lease acquisitions and grant checks that fail (the lease cannot be read), per call.
  var failedLeaseCalls = 0.0
  /// Store reads and saves that take 0.3-2.5 s, per operation.
  var slowStoreOperations = 0.0
  /// The longest a lease's change notice takes to reach a process (zero: at once). The file
  /// lease notices a change when its directory watcher or its poll reads the file, the
  /// PostgreSQL lease when a `NOTIFY` or its poll arrives: late, in order, bounded.
  var noticeDelayLimit = Duration.zero
  /// The share (percent) of the server's unavailable answers that are 429 with `Retry-After`
  /// (rate limited) instead of 503.
  var tooManyRequests = 0.0

  static func draw(_ rng: inout FleetRandom) -> FleetFaults {
    func maybe(_ percent: Double) -> Double { rng.chance(60) ? percent : 0 }
    return FleetFaults(
      failedSaves: maybe(Double.random(in: 2...15, using: &rng)),
      failedRenewals: maybe(Double.random(in: 2...15, using: &rng)),
      unavailable: maybe(Double.random(in: 5...30, using: &rng)),
      dropped: maybe(Double.random(in: 2...10, using: &rng)),
      slowReplies: maybe(Double.random(in: 2...10, using: &rng)),
      seamPauses: maybe(Double.random(in: 3...20, using: &rng)),
      outages: maybe(Double.random(in: 2...6, using: &rng)))
  }

  var description: String {
    "saves \(Int(failedSaves))%, renewals \(Int(failedRenewals))%, 503 \(Int(unavailable))%, "
      + "dropped \(Int(dropped))%, slow \(Int(slowReplies))%, pauses at seams \(Int(seamPauses))%, "
      + "outages \(Int(outages))%, garbled \(Int(garbledReplies))%, hung \(Int(hungOperations))%, "
      + "failed reads \(Int(failedReads))%, failed lease calls \(Int(failedLeaseCalls))%, "
      + "slow store \(Int(slowStoreOperations))%, "
      + "lease notices late by up to \(Int(noticeDelayLimit / .milliseconds(1))) ms, "
      + "429 among them \(Int(tooManyRequests))%"
  }
}
