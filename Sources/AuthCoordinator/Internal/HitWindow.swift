import Foundation

extension AccountStateMachine {
  /// When a cached model stops being served by a hit: at its expiry less the leeway, or when a
  /// refresh ahead falls due, whichever comes first. The machine's own rule
  /// (``AccountStateMachine/servableModel(at:)``), in a value that a thread's replica of the
  /// model keeps: while the machine has not changed, the replica decides a hit as the machine
  /// would.
  struct HitWindow: Equatable {
    var leeway: TimeInterval
    var refreshAheadAt: Date?

    /// Whether `model` is served at `date`, or the request must be decided by the machine
    /// (it is expired, or a refresh ahead is due).
    @inline(__always)
    func admits(_ model: AuthModel, at date: Date) -> Bool {
      guard model.isValid(at: date, leeway: leeway) else { return false }
      if let due = refreshAheadAt, date >= due { return false }
      return true
    }
  }
}
