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
  ///
  /// A coordinator without a lease gives every flight one shared record (``unleased``): only
  /// taking a grant writes to it, and that needs a lease, so the shared record stays empty
  /// and its readers never race (a debug build checks every write). A record per flight was
  /// 192 bytes of every flight's heap for nothing.
  final class HeldLease {
    var grant: LeaseGrant? {
      didSet { assert(!isShared, "a write to the record every unleased flight shares") }
    }
    var renewal: Task<Void, Never>? {
      didSet { assert(!isShared, "a write to the record every unleased flight shares") }
    }
    /// Whether the grant is still held, as far as its renewal knows.
    var hold: LeaseHold? {
      didSet { assert(!isShared, "a write to the record every unleased flight shares") }
    }
    /// The lease changes counted before the last attempt: a release announced after the
    /// attempt wakes the wait that follows it.
    var seenVersion: UInt64 = 0 {
      didSet { assert(!isShared, "a write to the record every unleased flight shares") }
    }
    /// The one record of a coordinator without a lease, which no flight writes to.
    let isShared: Bool

    init(shared: Bool = false) { isShared = shared }

    /// Whether a grant is held. Out of line: reading `grant` in an async function copies the
    /// whole grant into its frame.
    var holdsGrant: Bool {
      @inline(never) get { grant != nil }
    }
  }

  /// A flight's hold of its grant (``LeaseHoldState``, which decides), shared between the
  /// renewal task and the flight's task.
  final class LeaseHold: Sendable {
    private let state: LockedState<LeaseHoldState>

    /// A hold of a grant asked for at `sent`.
    init(grantedAt sent: Duration, timeToLive: Duration, maximumHold: Duration) {
      state = LockedState(
        LeaseHoldState(grantedAt: sent, timeToLive: timeToLive, maximumHold: maximumHold))
    }

    /// The grant is neither lost nor given up.
    var isHeld: Bool { state.withLock { $0.isHeld } }
    /// The maximum hold passed and the lease was given up; nobody deposed the holder.
    var wasGivenUp: Bool { state.withLock { $0.status == .over } }
    /// When the renewal task should wake.
    var wakeAt: Duration { state.withLock { $0.wakeAt } }
    /// See ``LeaseHoldState/confirms(at:)``.
    func confirms(at now: Duration) -> Bool { state.withLock { $0.confirms(at: now) } }
    /// See ``LeaseHoldState/renewalDue(at:)``.
    func renewalDue(at now: Duration) -> LeaseHoldState.Renewal {
      state.withLock { $0.renewalDue(at: now) }
    }
    /// See ``LeaseHoldState/renewed(sentAt:)``.
    func renewed(sentAt sent: Duration) { state.withLock { $0.renewed(sentAt: sent) } }
    /// See ``LeaseHoldState/renewalFailed(at:)``.
    func renewalFailed(at now: Duration) -> Bool { state.withLock { $0.renewalFailed(at: now) } }
    /// See ``LeaseHoldState/end(_:)``.
    func end(_ reason: LeaseHoldState.Status) -> Bool { state.withLock { $0.end(reason) } }
  }

  /// Renews the flight's grant until the flight releases it (the task is cancelled), the grant
  /// is lost, or the maximum hold passes (then the lease is given up), as `hold` decides. On the
  /// injected clock, like every other wait (tests tie the lease's wall clock to it).
  func renew(
    _ grant: LeaseGrant, of lease: any AuthorizationLease, flight id: UInt64, hold: LeaseHold
  ) async {
    let ttl = configuration.leaseTimeToLive
    while true {
      do { try await clock.sleepUntil(hold.wakeAt) } catch { return }
      let now = clock.now()
      switch hold.renewalDue(at: now) {
      case .stop:
        return
      case .giveUp:
        table.stripe(for: grant.key).counters.update { $0.holdsEnded += 1 }
        broadcaster.emit(.leaseHoldEnded(key: grant.key, flight: id))
        do { try await lease.release(grant) } catch {
          reportStoreFailure(grant.key, .lease, error)
        }
        return
      case .renew:
        do {
          guard try await lease.renew(grant, timeToLive: ttl) != nil else {
            lost(hold, grant.key, flight: id)
            return
          }
          hold.renewed(sentAt: now)
        } catch {
          reportStoreFailure(grant.key, .lease, error)
          if hold.renewalFailed(at: now) {
            countLost(grant.key, flight: id)
            return
          }
        }
      }
    }
  }

  /// Whether the flight may store its result under its lease: it still holds the grant (a
  /// renewal just before the save confirms it). A store that is not shared needs no lease.
  ///
  /// A hold that ended (the grant lost, or given up at the maximum hold) still may, in a store
  /// that takes part in the fencing: the fence refuses the save if a later holder saved first,
  /// and otherwise it keeps the newest refresh token instead of forgetting it. A grant lost
  /// because its renewals failed, with nobody taking the lease over, left the only copy of the
  /// family's newest refresh token in this process's memory (the shared-lease stress's lost
  /// rotation, `LostHoldSaveTests`).
  func stillHolds(_ held: HeldLease, flight id: UInt64) async -> Bool {
    guard let grant = held.grant, let lease, let hold = held.hold else { return true }
    let fenced = store is any FencedTokenStore && PlantedBug.planted != .dropRotationOnLostHold
    guard hold.isHeld else { return fenced }
    let sent = clock.now()
    do {
      if try await lease.renew(grant, timeToLive: configuration.leaseTimeToLive) != nil {
        hold.renewed(sentAt: sent)
        return true
      }
    } catch {
      // In doubt (the lease cannot be read now), the grant is taken as held: the renewal
      // task's retries tell a lapse from a blip.
      reportStoreFailure(grant.key, .lease, error)
      return hold.isHeld || fenced
    }
    lost(hold, grant.key, flight: id)
    return fenced
  }

  /// The grant was found taken over: the hold is lost (counted and reported once).
  func lost(_ hold: LeaseHold, _ key: AccountKey, flight id: UInt64) {
    guard hold.end(.lost) else { return }
    countLost(key, flight: id)
  }

  private func countLost(_ key: AccountKey, flight id: UInt64) {
    table.stripe(for: key).counters.update { $0.leasesLost += 1 }
    broadcaster.emit(.leaseLost(key: key, flight: id))
  }
}
