import Foundation

/// Prints what happens, stamped with the demo clock's time, and keeps the wall-clock date that
/// token expiry is measured against (the demo's date runs at the demo clock's speed).
final class Timeline: @unchecked Sendable {
  let clock: ScaledClock
  let startDate = Date()
  let quiet: Bool
  private let lock = NSLock()

  init(clock: ScaledClock, quiet: Bool) {
    self.clock = clock
    self.quiet = quiet
  }

  var seconds: Double { clock.now.offset.secondsValue }

  /// The demo's wall-clock date.
  var date: Date { startDate.addingTimeInterval(seconds) }

  func log(_ message: String) {
    guard !quiet else { return }
    let stamp = String(format: "%8.3fs", seconds)
    lock.withLock { print("[\(stamp)] \(message)") }
  }
}
