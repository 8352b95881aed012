/// The injected `any Clock<Duration>`, with its instants turned into offsets from the moment the
/// coordinator was created, so that the state machine can keep plain `Duration` values.
package struct CoordinatorClock: Sendable {
  /// The time elapsed on the clock since the coordinator was created.
  let now: @Sendable () -> Duration
  /// Sleeps until the given offset; throws `CancellationError` when cancelled.
  let sleepUntil: @Sendable (Duration) async throws -> Void

  /// The longest wait the coordinator arms: about a century. Longer timeouts (up to
  /// `.seconds(Int64.max)`, a common way to say "no timeout") are clamped to it, since the
  /// clocks trap when asked to sleep that long.
  package static let longestWait: Duration = .seconds(100 * 365 * 86_400)

  /// `timeout`, at least zero and at most ``longestWait``.
  static func clamped(_ timeout: Duration) -> Duration { min(max(timeout, .zero), longestWait) }

  /// The offset `timeout` after `start` (default: now), clamped to ``longestWait``.
  func deadline(after timeout: Duration, from start: Duration? = nil) -> Duration {
    Self.deadline(after: timeout, from: start ?? now())
  }

  /// The offset `timeout` after `start`, clamped to ``longestWait``.
  static func deadline(after timeout: Duration, from start: Duration) -> Duration {
    start + min(max(timeout, .zero), longestWait)
  }

  init(_ clock: some Clock<Duration>) {
    let origin = clock.now
    now = { origin.duration(to: clock.now) }
    sleepUntil = { offset in
      try await clock.sleep(until: origin.advanced(by: offset), tolerance: nil)
    }
  }
}
