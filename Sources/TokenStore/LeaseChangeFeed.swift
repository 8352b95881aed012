/// The change notices of an ``AuthorizationLease``: how a waiter learns that the key it waits
/// for was released, or that an account signed out, without busy-waiting.
///
/// What every implementation promises: ``changes()`` yields after every release and sign-out,
/// made in this process or another, to every subscription that existed when it happened. A
/// notice may be late or duplicated, never silently lost: an implementation that cannot tell
/// what changed (a file watcher that overflowed, a database connection that reconnected and may
/// have missed `NOTIFY`s) yields ``LeaseChange/unknown``, and waiters then look again.
public protocol LeaseChangeFeed: Sendable {
  /// A new subscription to the lease's changes, from this process and others, from now on.
  ///
  /// - Returns: A stream that yields after each change; it ends when the subscriber stops
  ///   iterating it or the lease is deallocated.
  func changes() -> AsyncStream<LeaseChange>
}

/// A change announced by ``LeaseChangeFeed/changes()``.
public enum LeaseChange: Sendable, Hashable {
  /// A holder gave the key up; whatever it obtained is in the store.
  case released(AccountKey)
  /// The account signed out in the process of `owner`.
  case signedOut(account: String, by: String)
  /// Every user signed out in the process of `owner`.
  case signedOutAll(by: String)
  /// Something changed; the implementation cannot tell what (waiters try the lease again).
  case unknown

  /// How many changes a subscription of the package's leases buffers for a subscriber that
  /// has not read them yet. Past it the oldest are dropped, and a stand-in follows: for a
  /// dropped sign-out, ``signedOutAll(by:)`` with no owner (every account may have signed out:
  /// the subscriber forgets them all and reads the store again); for a dropped release,
  /// ``unknown``.
  package static var bufferSize: Int { 1024 }

  /// Whether the change is a sign-out (of one account or of all).
  package var isSignOut: Bool {
    switch self {
    case .signedOut, .signedOutAll: return true
    case .released, .unknown: return false
    }
  }
}

extension AsyncStream<LeaseChange>.Continuation {
  /// Yields `change`; if the buffer was full and a change was dropped, a stand-in follows it
  /// (``LeaseChange/bufferSize``), so a burst never loses a sign-out silently.
  package func deliver(_ change: LeaseChange) {
    guard case .dropped(let lost) = yield(change) else { return }
    var standIn: LeaseChange = lost.isSignOut ? .signedOutAll(by: "") : .unknown
    // The stand-in is the newest change, so it stands for what it pushes out too, unless it is
    // `unknown` and pushes out a sign-out: then an all-accounts sign-out follows it.
    while case .dropped(let oldest) = yield(standIn), standIn == .unknown, oldest.isSignOut {
      standIn = .signedOutAll(by: "")
    }
  }
}
