import Foundation

/// Prints what happens, stamped with the demo's virtual time, and keeps the wall-clock date that
/// token expiry is measured against (the demo's date moves with the virtual clock).
final class Timeline: @unchecked Sendable {
  let clock: VirtualClock
  let startDate = Date()
  let quiet: Bool
  private let lock = NSLock()

  init(clock: VirtualClock, quiet: Bool) {
    self.clock = clock
    self.quiet = quiet
  }

  var seconds: Double { clock.now.offset.seconds }

  /// The demo's wall-clock date.
  var date: Date { startDate.addingTimeInterval(seconds) }

  func log(_ message: String) {
    guard !quiet else { return }
    let stamp = String(format: "%8.3fs", seconds)
    lock.withLock { print("[\(stamp)] \(message)") }
  }
}
