import Foundation

/// The right to authorize one account key, shared by every process or replica that uses one
/// token store: the cross-process half of the coordinator's single flight.
///
/// Processes (an app and its extensions, or worker processes on one host) and replicas of a
/// service that share a ``TokenStore`` share a lease too. Before it authorizes, a coordinator
/// takes the key's lease; a process that finds it held waits for the holder's result (it watches
/// ``LeaseChangeFeed/changes()``) and adopts the model the holder stored, instead of authorizing
/// a second time. That is what keeps a rotating refresh token from being spent twice.
///
/// A lease is three concepts, each a protocol of its own so that an implementation (a file, a
/// database table, a lock service) can be read and tested one concept at a time:
/// - ``LeaseGrants``, **the grant**: take, renew, release, and ask whether a grant is still
///   current. One holder per key; a takeover gets a larger ``LeaseGrant/fence``.
/// - ``SignOutGenerations``, **sign-outs**: a logout makes every earlier grant of the account
///   not current, so a late result never brings a signed-out user back.
/// - ``LeaseChangeFeed``, **change notices**: waiters learn of releases and sign-outs without
///   busy-waiting.
///
/// What the coordinator relies on, whatever the implementation:
/// - **Never held by a lock.** A lease is a record (owner, expiry, fence), changed under a brief
///   lock or one transaction at most; nothing stays locked while the holder authorizes, which can
///   take minutes. On iOS a suspended app that holds a file lock in a shared container is
///   terminated (0xdead10cc).
/// - **Expiries on one clock that never steps.** Every participant compares expiries on the
///   same clock: the package's file lease uses the host's boot clock; a database lease should
///   use the database's own clock (`now()`), never the replicas'. The `Date`s it reports are the
///   time left, counted from the caller's wall clock.
/// - **Fenced saves.** A store that takes part in the lease (``FencedTokenStore``) refuses a save
///   whose grant a later grant's save superseded.
///
/// The package ships `InMemoryAuthorizationLease` (coordinators in one process: simulated
/// processes, tests) and `FileAuthorizationLease` (processes on one host, an iOS app group).
public protocol AuthorizationLease: LeaseGrants, SignOutGenerations, LeaseChangeFeed {}
