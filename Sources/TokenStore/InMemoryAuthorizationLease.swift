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
public final class InMemoryAuthorizationLease: AuthorizationLease {
  private struct Holder {
    var owner: String
    var fence: UInt64
    var expiresAt: Date
    /// Set for a back-off a released grant left (``release(_:backingOff:)``): no one owns it.
    var backOff: LeaseBackOff? = nil
  }

  private struct State {
    var holders: [AccountKey: Holder] = [:]
    var nextFence: UInt64 = 1
    /// Bumped by every sign-out.
    var generation: UInt64 = 0
    var userSignedOutAt: [String: UInt64] = [:]
    var allSignedOutAt: UInt64 = 0
    var subscribers: [UInt64: AsyncStream<LeaseChange>.Continuation] = [:]
    var nextSubscriber: UInt64 = 0

    /// Removes the back-offs of the keys `matches` selects: a signed-out account's next
    /// sign-in must not wait out its old back-off.
    mutating func endBackOffs(of matches: (AccountKey) -> Bool) {
      holders = holders.filter { key, holder in holder.backOff == nil || !matches(key) }
    }
  }

  private let state = LockedState(State())
  private let now: @Sendable () -> Date

  /// Creates an empty lease.
  ///
  /// - Parameter now: The wall clock that expiries are measured on; tests inject one.
  public init(now: @escaping @Sendable () -> Date = { Date() }) {
    self.now = now
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
      if let holder = state.holders[key], holder.expiresAt > date {
        guard let backOff = holder.backOff else {
          return .heldElsewhere(owner: holder.owner, expiresAt: holder.expiresAt)
        }
        return .backingOff(
          until: holder.expiresAt, failures: backOff.failures, code: backOff.code)
      }
      let holder = Holder(
        owner: owner, fence: state.nextFence,
        expiresAt: date.addingTimeInterval(timeToLive.seconds))
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
    let subscribers = state.withLock { state -> [AsyncStream<LeaseChange>.Continuation] in
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
    state.withLock { state in
      state.generation += 1
      state.userSignedOutAt[account] = state.generation
      state.endBackOffs { $0.mcUid == account }
    }
  }

  /// Ends the current generation of every grant, and every back-off, silently.
  public func revokeAllGrants() async {
    state.withLock { state in
      state.generation += 1
      state.allSignedOutAt = state.generation
      state.endBackOffs { _ in true }
    }
  }

  /// Ends the current generation of `account`'s grants, and its keys' back-offs, and announces
  /// it.
  ///
  /// - Parameters:
  ///   - account: The account.
  ///   - owner: Who signed out.
  public func signOut(account: String, by owner: String) async {
    let subscribers = state.withLock { state in
      state.generation += 1
      state.userSignedOutAt[account] = state.generation
      state.endBackOffs { $0.mcUid == account }
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.signedOut(account: account, by: owner)) }
  }

  /// Ends the current generation of every grant, and every back-off, and announces it.
  ///
  /// - Parameter owner: Who signed out.
  public func signOutAll(by owner: String) async {
    let subscribers = state.withLock { state in
      state.generation += 1
      state.allSignedOutAt = state.generation
      state.endBackOffs { _ in true }
      return state.subscribers.sorted { $0.key < $1.key }.map(\.value)
    }
    for subscriber in subscribers { subscriber.deliver(.signedOutAll(by: owner)) }
  }

  /// Whether no sign-out of the grant's user happened since it was taken.
  ///
  /// - Parameter grant: The grant.
  /// - Returns: `false` after a sign-out of its user or of everyone.
  public func isCurrent(_ grant: LeaseGrant) async -> Bool {
    state.withLock { state in
      state.allSignedOutAt <= grant.generation
        && (state.userSignedOutAt[grant.key.mcUid] ?? 0) <= grant.generation
    }
  }

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
