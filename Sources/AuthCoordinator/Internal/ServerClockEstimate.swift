import Foundation
import SyncPrimitives

/// How far the token servers' clocks are ahead of this process's (`server − local`), from the
/// `Date` headers of their replies: the median of the last few samples, each within ±12 hours
/// (a `Date` header further off is broken, not skewed). Only absolute expiries a server states
/// on its own clock are corrected with it; a relative `expires_in` never needs it.
final class ServerClockEstimate: Sendable {
  /// The samples kept for the median.
  static let sampleCount = 5
  /// The largest offset believed.
  static let bound: Duration = .seconds(12 * 3600)

  private struct State {
    var samples: [Duration] = []
    var estimate: Duration?
  }

  private let state = LockedState(State())
  /// Called (outside the lock) when the estimate moved by a second or more.
  private let onUpdate: @Sendable (Duration) -> Void

  init(onUpdate: @escaping @Sendable (Duration) -> Void = { _ in }) {
    self.onUpdate = onUpdate
  }

  /// The estimate, or `nil` before the first sample.
  var offset: Duration? { state.withLock { $0.estimate } }

  /// The server's clock read `serverDate` when this one read `localDate`.
  func note(serverDate: Date, localDate: Date) {
    let seconds = serverDate.timeIntervalSince(localDate)
    guard seconds.isFinite, abs(seconds) <= Self.bound.seconds else { return }
    let sample = Duration.seconds(seconds)
    let moved = state.withLock { state -> Duration? in
      state.samples.append(sample)
      if state.samples.count > Self.sampleCount { state.samples.removeFirst() }
      let median = state.samples.sorted()[state.samples.count / 2]
      let previous = state.estimate
      state.estimate = median
      guard let previous else { return median }
      return abs((median - previous).seconds) >= 1 ? median : nil
    }
    if let moved { onUpdate(moved) }
  }

  /// `serverDate`, a date on the server's clock, on this process's clock.
  func localDate(forServerDate serverDate: Date) -> Date {
    guard let offset else { return serverDate }
    return serverDate.addingTimeInterval(-offset.seconds)
  }
}
