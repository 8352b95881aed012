import Foundation
import SyncPrimitives

// Rule 22: a hold of the cross-process lease always ends. The holder renews its grant every
// third of the time to live and retries a renewal that failed until the grant would lapse; a
// holder whose grant was taken over or lapsed learns it at once and stores nothing; and no hold
// outlasts the maximum hold, however long the authorizer takes.
extension AuthCoordinator {
  /// The cross-process lease a flight holds, and the task that renews it. A reference, used by
  /// the flight's task alone (one step at a time), so that passing it to a step costs the
  /// flight's frame a pointer, not a copy.
  final class HeldLease {
    var grant: LeaseGrant?
    var renewal: Task<Void, Never>?
    /// Whether the grant is still held, as far as its renewal knows.
    var hold: LeaseHold?
    /// The lease changes counted before the last attempt: a release announced after the
    /// attempt wakes the wait that follows it.
    var seenVersion: UInt64 = 0
  }

  /// What a flight's renewal found out about its grant, shared with the flight's task.
  final class LeaseHold: Sendable {
    enum State: Sendable {
      case held
      /// A renewal found the grant taken over, or renewals failed until it lapsed.
      case lost
      /// The maximum hold passed: the renewal gave the lease up.
      case over
    }

    private let state = LockedState(State.held)
    /// Until when (on the injected clock) the grant is known to be this holder's: a time to
    /// live after it was taken or last renewed.
    private let confirmedUntil: LockedState<Duration>

    /// A hold of a grant taken (or renewed) at `now`, for `timeToLive`.
    init(at now: Duration, timeToLive: Duration) {
      confirmedUntil = LockedState(CoordinatorClock.deadline(after: timeToLive, from: now))
    }

    /// The grant is neither lost nor given up.
    var isHeld: Bool { state.withLock { $0 == .held } }

    /// A renewal at `now` extended the grant by `timeToLive`.
    func renewed(at now: Duration, timeToLive: Duration) {
      let until = CoordinatorClock.deadline(after: timeToLive, from: now)
      confirmedUntil.withLock { $0 = max($0, until) }
    }

    /// Whether the grant is held and known to stay this holder's for at least `margin` after
    /// `now`, without asking the lease (which could not be asked: rule 16's guard, in doubt).
    func isHeld(for margin: Duration, at now: Duration) -> Bool {
      isHeld && confirmedUntil.withLock { now + margin < $0 }
    }

    /// The maximum hold passed and the lease was given up; nobody deposed the holder.
    var wasGivenUp: Bool { state.withLock { $0 == .over } }

    /// Ends the hold; `false` when it had ended already.
    func end(_ reason: State) -> Bool {
      state.withLock { state in
        guard state == .held else { return false }
        state = reason
        return true
      }
    }
  }

  /// Renews `grant` until the flight releases it (the task is cancelled), the grant is lost,
  /// or the maximum hold passes (then the lease is given up). On the injected clock, like every
  /// other wait (tests tie the lease's wall clock to it). Its time to live counts from `start`,
  /// when the grant was asked for.
  func renew(
    _ grant: LeaseGrant, of lease: any AuthorizationLease, flight id: UInt64, hold: LeaseHold,
    since start: Duration
  ) async {
    let ttl = configuration.leaseTimeToLive
    let holdEnds = CoordinatorClock.deadline(after: policy.maximumHold, from: start)
    var lapses = CoordinatorClock.deadline(after: ttl, from: start)
    var wakeAt = CoordinatorClock.deadline(after: ttl / 3, from: start)
    while true {
      do { try await clock.sleepUntil(min(wakeAt, holdEnds)) } catch { return }
      let now = clock.now()
      if now >= holdEnds {
        guard hold.end(.over) else { return }
        table.stripe(for: grant.key).counters.update { $0.holdsEnded += 1 }
        broadcaster.emit(.leaseHoldEnded(key: grant.key, flight: id))
        do { try await lease.release(grant) } catch {
          reportStoreFailure(grant.key, .lease, error)
        }
        return
      }
      do {
        guard try await lease.renew(grant, timeToLive: ttl) != nil else {
          lost(hold, grant.key, flight: id)
          return
        }
        hold.renewed(at: now, timeToLive: ttl)
        lapses = CoordinatorClock.deadline(after: ttl, from: now)
        wakeAt = CoordinatorClock.deadline(after: ttl / 3, from: now)
      } catch {
        // Perhaps transient (a full disk, a lock held a moment): try again soon, as long as
        // the grant has not lapsed; after that another process may have taken it over.
        reportStoreFailure(grant.key, .lease, error)
        let retry = CoordinatorClock.deadline(after: ttl / 12, from: now)
        if retry >= lapses {
          lost(hold, grant.key, flight: id)
          return
        }
        wakeAt = retry
      }
    }
  }

  /// Whether the flight may store its result under its lease: it still holds the grant (a
  /// renewal just before the save confirms it). A store that is not shared needs no lease.
  ///
  /// A grant given up at the maximum hold (not lost: nobody took it over before) still may, in a
  /// store that takes part in the fencing: the fence refuses the save if a later holder saved
  /// first, and otherwise it keeps the newest refresh token instead of forgetting it.
  func stillHolds(_ held: HeldLease, flight id: UInt64) async -> Bool {
    guard let grant = held.grant, let lease, let hold = held.hold else { return true }
    if hold.wasGivenUp { return store is any FencedTokenStore }
    guard hold.isHeld else { return false }
    do {
      if try await lease.renew(grant, timeToLive: configuration.leaseTimeToLive) != nil {
        hold.renewed(at: clock.now(), timeToLive: configuration.leaseTimeToLive)
        return true
      }
    } catch {
      // In doubt (the lease cannot be read now), the grant is taken as held: the renewal
      // task's retries tell a lapse from a blip.
      reportStoreFailure(grant.key, .lease, error)
      return hold.isHeld
    }
    lost(hold, grant.key, flight: id)
    return false
  }

  func lost(_ hold: LeaseHold, _ key: AccountKey, flight id: UInt64) {
    guard hold.end(.lost) else { return }
    table.stripe(for: key).counters.update { $0.leasesLost += 1 }
    broadcaster.emit(.leaseLost(key: key, flight: id))
  }
}
