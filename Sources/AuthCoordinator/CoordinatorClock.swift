/// The injected `any Clock<Duration>`, with its instants turned into offsets from the moment the
/// coordinator was created, so that the state machine can keep plain `Duration` values.
struct CoordinatorClock: Sendable {
  /// The time elapsed on the clock since the coordinator was created.
  let now: @Sendable () -> Duration
  /// Sleeps until the given offset; throws `CancellationError` when cancelled.
  let sleepUntil: @Sendable (Duration) async throws -> Void

  init(_ clock: some Clock<Duration>) {
    let origin = clock.now
    now = { origin.duration(to: clock.now) }
    sleepUntil = { offset in
      try await clock.sleep(until: origin.advanced(by: offset), tolerance: nil)
    }
  }
}
