import Foundation
import SyncPrimitives

/// An ``AuthorizationLease`` in memory: for several coordinators in one process (simulated
/// processes in tests and demos) sharing one ``InMemoryTokenStore``.
///
/// ```swift
/// let store = InMemoryTokenStore()
/// let lease = InMemoryAuthorizationLease()
/// let app = AuthCoordinator(store: store, lease: lease, authorizer: authorizer)
/// let widget = AuthCoordinator(store: store, lease: lease, authorizer: authorizer)
/// ```
///
/// It keeps its history only while a grant can need it, as ``FileAuthorizationLease`` does: a
/// back-off goes once it ended; a grant that lapsed and was not taken over (its holder may
/// still renew it) a year after it lapsed; an account's sign-out a year after it was made, once
/// no grant the lease holds was taken before it. Past 1,024 sign-outs and holders, the year is
/// an hour. A grant the lease no longer holds (released, or taken over) and that is older than
/// a dropped sign-out reads as not current, never as current. So a long-lived process with
/// many accounts keeps a bounded history.
///
/// Its grants' fences are numbered from the wall clock's microseconds when it is made (as a
/// fresh ``FileAuthorizationLease`` record's are), so that a store which outlives the process
/// and keeps the fences of the previous run's grants (a ``FileTokenStore``) accepts this run's:
/// each is above them unless the clock was stepped back between the two runs.
public final class InMemoryAuthorizationLease: AuthorizationLease {
  private struct Holder {
    var owner: String
    var fence: UInt64
    var expiresAt: Date
    /// The sign-out generation the grant was taken in (none for a back-off).
    var generation: UInt64 = 0
    /// Set for a back-off a released grant left (``release(_:backingOff:)``): no one owns it.
    var backOff: LeaseBackOff? = nil
  }

  private struct State {
    var holders: [AccountKey: Holder] = [:]
    /// Numbered from the wall clock's microseconds when the lease was made
    /// (``LeaseRecord/firstFence(at:)``), as the file lease's record is: a store that outlives
    /// the process keeps fences the previous run's lease issued, and this run's grants must be
    /// above them.
    var nextFence: UInt64
    /// Bumped by every sign-out.
    var generation: UInt64 = 0
    /// Each account's latest sign-out or revocation, while a grant can need it.
    var userSignedOutAt: [String: SignOutMark] = [:]
    var allSignedOutAt: UInt64 = 0
    /// The generation below which sign-outs were dropped: a grant taken before it is not
    /// current.
    var historyFloor: UInt64 = 0
    /// When the history was last pruned.
    var prunedAt: Date?
    var subscribers: [UInt64: AsyncStream<LeaseChange>.Continuation] = [:]
    var nextSubscriber: UInt64 = 0
    var bounds: HistoryBounds
    var statistics = HistoryStatistics()

    /// Removes the back-offs of the keys `matches` selects: a signed-out account's next
    /// sign-in must not wait out its old back-off.
    mutating func endBackOffs(of matches: (AccountKey) -> Bool) {
      // The seams issue's seventh break, planted: the back-offs outlive the sign-out.
      if PlantedBug.planted == .ignoreBackOffOnLogout { return }
      let before = holders.count
      holders = holders.filter { key, holder in holder.backOff == nil || !matches(key) }
      statistics.backOffsEndedBySignOut += before - holders.count
    }

    /// Moves the generation on for a sign-out or revocation of `account` at `date`, and ends
    /// the back-offs of its keys.
    mutating func signOut(_ account: String, at date: Date) {
      generation += 1
      userSignedOutAt[account] = SignOutMark(generation: generation, at: date)
      endBackOffs { $0.account == account }
    }

    /// Moves the generation on for a sign-out or revocation of everyone, and ends every
    /// back-off.
    mutating func signOutAll() {
      generation += 1
      allSignedOutAt = generation
      endBackOffs { _ in true }
    }

    /// Whether no sign-out of the grant's account, or of everyone, happened since it was
    /// taken, and the history it needs was not dropped.
    func isCurrent(_ grant: LeaseGrant) -> Bool {
      historyFloor <= grant.generation && allSignedOutAt <= grant.generation
        && (userSignedOutAt[grant.key.account]?.generation ?? 0) <= grant.generation
    }

    /// Drops the history no grant can need any more (``dropHistory(at:keeping:)``), at most
    /// once per ``InMemoryAuthorizationLease/pruningInterval`` of the lease's clock, so that
    /// an operation costs a pass over the history only that often: keeping it for
    /// ``LeaseRecord/historyRetention``, or for ``LeaseRecord/minimumHistoryRetention`` once
    /// more than ``InMemoryAuthorizationLease/compactionThreshold`` sign-outs and holders
    /// remain.
    mutating func pruneHistory(at date: Date) {
      if let prunedAt,
        abs(date.timeIntervalSince(prunedAt)) < bounds.pruningInterval
      {
        return
      }
      prunedAt = date
      statistics.passes += 1
      dropHistory(at: date, keeping: bounds.retention)
      if userSignedOutAt.count + holders.count > bounds.compactionThreshold {
        statistics.compactions += 1
        if PlantedBug.planted == .forgetSignOutsOnHistoryReset {
          // The seams issue's fifth break, planted: the history past its bound is reset, its
          // sign-outs forgotten whatever grant may still ask, the floor left where it was.
          statistics.signOutsDropped += userSignedOutAt.count
          userSignedOutAt.removeAll()
          return
        }
        dropHistory(at: date, keeping: bounds.minimumRetention)
      }
    }

    /// Drops ended back-offs; grants that lapsed more than `retention` ago (a lapsed grant
    /// not taken over may still be renewed until then); and the sign-outs older than
    /// `retention` that are older than every grant the lease still holds, raising
    /// ``historyFloor`` to them. A grant the lease holds reads as current afterwards exactly
    /// as before; a grant it no longer holds, taken before a dropped sign-out, reads as not
    /// current.
    mutating func dropHistory(at date: Date, keeping retention: TimeInterval) {
      let before = (signOuts: userSignedOutAt.count, holders: holders.count)
      defer {
        statistics.signOutsDropped += before.signOuts - userSignedOutAt.count
        statistics.holdersDropped += before.holders - holders.count
      }
      holders = holders.filter { _, holder in
        guard holder.backOff == nil else { return holder.expiresAt > date }
        return date.timeIntervalSince(holder.expiresAt) <= retention
      }
      // The oldest generation a grant the lease holds may ask with.
      let oldest =
        holders.values.lazy.filter { $0.backOff == nil }.map(\.generation).min() ?? generation
      let dropped = userSignedOutAt.values.lazy.filter { mark in
        mark.generation <= oldest && date.timeIntervalSince(mark.at) > retention
      }
      let floor = max(historyFloor, dropped.map(\.generation).max() ?? 0)
      // A sign-out at or below the floor ends no grant the floor does not end already.
      userSignedOutAt = userSignedOutAt.filter { $0.value.generation > floor }
      historyFloor = floor
    }
  }

  /// An account's latest sign-out or revocation: its generation, and when, on the lease's
  /// clock.
  private struct SignOutMark {
    var generation: UInt64
    var at: Date
  }

  /// How long on the lease's clock at least between two passes over the history: one second.
  static let pruningInterval: TimeInterval = 1
  /// The number of sign-outs and holders past which the history is kept for
  /// ``LeaseRecord/minimumHistoryRetention`` (an hour) instead of a year: 1,024.
  static let compactionThreshold = 1_024

  /// How long the lease keeps its history and how often it prunes it. The defaults are the
  /// lease's (and the file lease's) own; the fleet simulation shrinks them so that the
  /// history is compacted within its simulated minutes.
  package struct HistoryBounds: Sendable {
    /// How long a sign-out, and a lapsed grant not taken over, are kept: a year.
    package var retention: TimeInterval = LeaseRecord.historyRetention
    /// How long they are kept past ``compactionThreshold``: an hour.
    package var minimumRetention: TimeInterval = LeaseRecord.minimumHistoryRetention
    /// The number of sign-outs and holders past which ``minimumRetention`` applies.
    package var compactionThreshold = InMemoryAuthorizationLease.compactionThreshold
    /// The least time between two passes over the history.
    package var pruningInterval: TimeInterval = InMemoryAuthorizationLease.pruningInterval

    package init() {}
  }

  /// What the lease's pruning did so far, for the fleet simulation's coverage counters.
  package struct HistoryStatistics: Sendable, Hashable {
    /// Passes over the history.
    package var passes = 0
    /// Passes that went on down to ``HistoryBounds/minimumRetention`` (a compaction).
    package var compactions = 0
    /// Sign-out marks dropped.
    package var signOutsDropped = 0
    /// Holders (lapsed grants, ended back-offs) dropped.
    package var holdersDropped = 0
    /// Back-offs that a sign-out or revocation ended.
    package var backOffsEndedBySignOut = 0
  }

  private let state: LockedState<State>
  private let now: @Sendable () -> Date

  /// Creates an empty lease.
  ///
  /// - Parameter now: The wall clock that expiries are measured on; tests inject one.
  public init(now: @escaping @Sendable () -> Date = { Date() }) {
    self.now = now
    state = LockedState(
      State(nextFence: LeaseRecord.firstFence(at: now()), bounds: HistoryBounds()))
  }

  /// Creates an empty lease that keeps its history within `historyBounds` (a simulation's
  /// small bounds, so that compaction happens within its minutes).
  ///
  /// - Parameters:
  ///   - now: The wall clock that expiries are measured on.
  ///   - historyBounds: How long the history is kept, and how often it is pruned.
  package init(now: @escaping @Sendable () -> Date, historyBounds: HistoryBounds) {
    self.now = now
    state = LockedState(State(nextFence: LeaseRecord.firstFence(at: now()), bounds: historyBounds))
  }

  deinit {
    let subscribers = state.withLock { $0.subscribers.values }
    for subscriber in subscribers { subscriber.finish() }
  }

  /// Takes the lease of `key` unless a grant that has not expired exists.
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - owner: Who asks.
  ///   - timeToLive: How long the grant lasts unless renewed.
  /// - Returns: The grant, or who holds the key.
  public func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async -> LeaseAttempt {
    let date = now()
    return state.withLock { state in
      state.pruneHistory(at: date)
      if let holder = state.holders[key], holder.expiresAt > date,
        holder.backOff == nil || PlantedBug.planted != .ignoreBackOffOnAcquire
      {
        guard let backOff = holder.backOff else {
          return .heldElsewhere(owner: holder.owner, expiresAt: holder.expiresAt)
        }
        return .backingOff(
          until: holder.expiresAt, failures: backOff.failures, code: backOff.code)
      }
      let holder = Holder(
        owner: owner, fence: state.nextFence,
        expiresAt: date.addingTimeInterval(timeToLive.seconds), generation: state.generation)
      state.nextFence += 1
      state.holders[key] = holder
      return .acquired(
        LeaseGrant(
          key: key, owner: owner, fence: holder.fence, generation: state.generation,
          expiresAt: holder.expiresAt))
    }
  }

  /// Extends `grant` while it is still the key's.
  ///
  /// - Parameters:
  ///   - grant: The grant.
  ///   - timeToLive: Counted from now.
  /// - Returns: The extended grant, or `nil` when it was taken over or released.
  public func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    let date = now()
    return state.withLock { state in
      guard var holder = state.holders[grant.key], holder.fence == grant.fence,
        holder.backOff == nil
      else { return nil }
      holder.expiresAt = date.addingTimeInterval(timeToLive.seconds)
      state.holders[grant.key] = holder
      return LeaseGrant(
        key: grant.key, owner: grant.owner, fence: grant.fence, generation: grant.generation,
        expiresAt: holder.expiresAt)
    }
  }

  /// Gives the key up and announces it.
  ///
  /// - Parameter grant: The grant.
  public func release(_ grant: LeaseGrant) async {
    let date = now()
    let subscribers = state.withLock { state -> [AsyncStream<LeaseChange>.Continuation] in
      state.pruneHistory(at: date)
      guard state.holders[grant.key]?.fence == grant.fence else { return [] }
      state.holders[grant.key] = nil
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.released(grant.key)) }
  }

  /// Gives the key up and keeps everyone off it for `backOff.duration`; announces the release.
  /// The back-off is clamped: at most ``LeaseBackOff/maximumDuration`` and
  /// ``LeaseBackOff/maximumFailures``.
  ///
  /// - Parameters:
  ///   - grant: The grant.
  ///   - backOff: The back-off.
  public func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async {
    let backOff = backOff.clamped
    let date = now()
    let subscribers = state.withLock { state -> [AsyncStream<LeaseChange>.Continuation] in
      state.pruneHistory(at: date)
      guard let holder = state.holders[grant.key], holder.fence == grant.fence,
        holder.backOff == nil
      else { return [] }
      // A fence of its own, as a grant has: the released grant's is no one's any more.
      state.holders[grant.key] = Holder(
        owner: "", fence: state.nextFence,
        expiresAt: date.addingTimeInterval(backOff.duration.seconds),
        backOff: backOff)
      state.nextFence += 1
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.released(grant.key)) }
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, silently.
  ///
  /// - Parameter account: The account.
  public func revokeGrants(ofAccount account: String) async {
    _ = await revokeGrantsReportingFence(ofAccount: account)
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, silently,
  /// and returns the largest fence issued before (read in the same step).
  ///
  /// - Parameter account: The account.
  /// - Returns: The largest fence of a grant (or back-off) this lease issued so far; when it
  ///   issued none, the fence just below its first (it numbers from the clock's microseconds at
  ///   its creation), so that every grant it issues later is above the mark.
  public func revokeGrantsReportingFence(ofAccount account: String) async -> UInt64? {
    let date = now()
    return state.withLock { state in
      state.pruneHistory(at: date)
      state.signOut(account, at: date)
      return state.nextFence - 1
    }
  }

  /// Ends the current generation of every grant, and every back-off, silently, and returns the
  /// largest fence issued before (read in the same step).
  ///
  /// - Returns: The largest fence this lease issued so far; when it issued none, the fence just
  ///   below its first, so that every grant it issues later is above the mark.
  public func revokeAllGrantsReportingFence() async -> UInt64? {
    let date = now()
    return state.withLock { state in
      state.pruneHistory(at: date)
      state.signOutAll()
      return state.nextFence - 1
    }
  }

  /// Ends the current generation of every grant, and every back-off, silently.
  public func revokeAllGrants() async {
    _ = await revokeAllGrantsReportingFence()
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, and announces
  /// it.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - owner: Who signed out.
  public func signOut(account: String, by owner: String) async {
    let date = now()
    let subscribers = state.withLock { state in
      state.pruneHistory(at: date)
      state.signOut(account, at: date)
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.signedOut(account: account, by: owner)) }
  }

  /// Ends the current generation of every grant, and every back-off, and announces it.
  ///
  /// - Parameter owner: Who signed out.
  public func signOutAll(by owner: String) async {
    let date = now()
    let subscribers = state.withLock { state in
      state.pruneHistory(at: date)
      state.signOutAll()
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.signedOutAll(by: owner)) }
  }

  /// Whether no sign-out of the grant's user happened since it was taken.
  ///
  /// - Parameter grant: The grant.
  /// - Returns: `false` after a sign-out of its user or of everyone, and for a grant the lease
  ///   no longer holds that is older than the history it dropped.
  public func isCurrent(_ grant: LeaseGrant) async -> Bool {
    state.withLock { $0.isCurrent(grant) }
  }

  /// What the lease keeps besides live grants, for tests: the per-account sign-out marks, the
  /// holders (grants and back-offs, live or not), and the generation below which the history
  /// was dropped.
  package var history: (signOuts: Int, holders: Int, floor: UInt64) {
    state.withLock { ($0.userSignedOutAt.count, $0.holders.count, $0.historyFloor) }
  }

  /// When `key`'s back-off ends, if the lease holds one for it now (for the fleet simulation's
  /// check that no token request leaves during a back-off). Reads, changes nothing.
  package func backOffEnd(for key: AccountKey) -> Date? {
    let date = now()
    return state.withLock { state in
      guard let holder = state.holders[key], holder.backOff != nil, holder.expiresAt > date
      else { return nil }
      return holder.expiresAt
    }
  }

  /// What the history's pruning did so far (``HistoryStatistics``).
  package var historyStatistics: HistoryStatistics { state.withLock { $0.statistics } }

  /// A new subscription to releases and sign-outs.
  ///
  /// - Returns: The changes from now on.
  public func changes() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream(
      bufferingPolicy: .bufferingNewest(LeaseChange.bufferSize))
    let id = state.withLock { state in
      let id = state.nextSubscriber
      state.nextSubscriber += 1
      state.subscribers[id] = continuation
      return id
    }
    continuation.onTermination = { [weak self] _ in
      _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
    }
    return stream
  }

}
