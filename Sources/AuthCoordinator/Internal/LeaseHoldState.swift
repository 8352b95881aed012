import Foundation

/// The decisions of a flight's hold of the cross-process lease (rules 16 and 22), as a value
/// with no tasks, clocks or I/O: when its renewal is due, what a renewal's answer or failure
/// means, when the hold is over, and whether the grant may cover a token request now.
///
/// The coordinator's renewal task and the flight's steps report to it (through
/// `AuthCoordinator.LeaseHold`, which shares it between them) and carry out what it decides.
/// Every instant is on the coordinator's injected clock.
struct LeaseHoldState: Equatable {
  enum Status: Equatable {
    case held
    /// A renewal found the grant taken over, or renewals failed until it lapsed.
    case lost
    /// The maximum hold passed: the lease was given up.
    case over
  }

  /// What the renewal task does when it wakes.
  enum Renewal: Equatable {
    /// Renew the grant now.
    case renew
    /// The maximum hold passed: give the lease up (the hold is ``Status/over`` now).
    case giveUp
    /// The hold ended already: stop.
    case stop
  }

  private(set) var status = Status.held
  /// Until when the grant is known to be this holder's: a time to live after it was asked for
  /// or a renewal of it was sent (an answer that came back late leaves less, or none).
  private(set) var confirmedUntil: Duration
  /// When the renewal task wakes next.
  private(set) var nextRenewal: Duration
  let timeToLive: Duration
  /// When the hold is over, however long the authorizer takes (the maximum hold).
  let holdEnds: Duration

  /// A grant asked for at `sent`.
  init(grantedAt sent: Duration, timeToLive: Duration, maximumHold: Duration) {
    self.timeToLive = timeToLive
    confirmedUntil = CoordinatorClock.deadline(after: timeToLive, from: sent)
    nextRenewal = CoordinatorClock.deadline(after: timeToLive / 3, from: sent)
    holdEnds = CoordinatorClock.deadline(after: maximumHold, from: sent)
  }

  /// The grant is neither lost nor given up.
  var isHeld: Bool { status == .held }

  /// When the renewal task should wake: the next renewal, or the end of the hold.
  var wakeAt: Duration { min(nextRenewal, holdEnds) }

  /// Whether the grant may cover a token request at `now`: held, and known to stay this
  /// holder's for a third of its time to live yet (a request, and the save of its answer, fit
  /// in it; a grant nearer its lapse is taken again).
  func confirms(at now: Duration) -> Bool {
    isHeld && now + timeToLive / 3 < confirmedUntil
  }

  /// The renewal task woke at `now`.
  mutating func renewalDue(at now: Duration) -> Renewal {
    guard isHeld else { return .stop }
    guard now < holdEnds else {
      status = .over
      return .giveUp
    }
    return .renew
  }

  /// A renewal sent at `sent` succeeded: the grant is this holder's for a time to live after
  /// it, and the next renewal is due a third of that later.
  mutating func renewed(sentAt sent: Duration) {
    confirmedUntil = max(confirmedUntil, CoordinatorClock.deadline(after: timeToLive, from: sent))
    nextRenewal = max(nextRenewal, CoordinatorClock.deadline(after: timeToLive / 3, from: sent))
  }

  /// A renewal sent at `now` could not be made (the lease's storage failed): perhaps
  /// transient, so it is tried again a twelfth of the time to live later, as long as the grant
  /// has not lapsed by then; after that another process may have taken it over, and the hold is
  /// lost.
  ///
  /// - Returns: Whether this ended the hold.
  mutating func renewalFailed(at now: Duration) -> Bool {
    guard isHeld else { return false }
    let retry = CoordinatorClock.deadline(after: timeToLive / 12, from: now)
    guard retry < confirmedUntil else { return end(.lost) }
    nextRenewal = retry
    return false
  }

  /// Ends the hold (the grant was found taken over: ``Status/lost``).
  ///
  /// - Returns: `false` when it had ended already.
  mutating func end(_ reason: Status) -> Bool {
    guard isHeld, reason != .held else { return false }
    status = reason
    return true
  }
}
