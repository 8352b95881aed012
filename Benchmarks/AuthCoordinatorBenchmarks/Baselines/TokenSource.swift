import AuthCoordinator
import Foundation

/// The shape every implementation is measured through: the coordinator's adapter, the five
/// baselines of docs/benchmarks.md, and one reference (a bare parked task).
///
/// `get` and `refresh` are `nonisolated(nonsending)`, so the harness adds no executor hop of its
/// own: each implementation pays exactly the hops its design implies.
protocol TokenSource: Sendable {
  /// Which implementation this is.
  var impl: Impl { get }
  /// Callers that have parked waiting for an authorization (baselines count cumulatively; the
  /// coordinator reports `statistics.waitingCallers`). The harness polls it before releasing
  /// the authorizer.
  var parked: Int { get }
  /// The implementation's own count of authorizations, when it keeps one.
  var reportedAuthorizations: Int? { get }

  /// Returns the cached model while valid; otherwise obtains a new one.
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel
  /// Forced refresh: `token` was rejected, never return it again.
  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel
}

extension TokenSource {
  var reportedAuthorizations: Int? { nil }
}

/// Produces a fresh model for a key: the slow path every baseline calls.
typealias Authorize = @Sendable (AccountKey) async throws -> AuthModel

/// How long before expiry a model counts as expired, as the coordinator's default
/// `refreshLeeway` (60 s).
let refreshLeeway: TimeInterval = 60

/// Thrown by sources that have no slow path (the bare lock read).
struct NoSlowPath: Error {}

/// The implementations, in table order.
enum Impl: String, CaseIterable, Codable, Sendable {
  case coordinator
  case plainActor = "actor"
  case sharedTask = "actor+Task"
  case callbackList = "callbacks"
  case serialBarrier = "barrier"
  case bareLock = "lock read"
  case parkedTask = "parked task (ref)"
  // After the reference so that B2's chart keeps its colours; B1's table lists them after
  // `lock read` all the same (the parked task takes no part in B1).
  case rwLock = "rwlock read"
  case noSync = "no sync (ref)"

  /// Whether this is one of the baselines the targets compare against.
  var isBaseline: Bool { self != .coordinator && self != .parkedTask && self != .noSync }

  /// Whether it only serves cache hits (no slow path): it takes part in B1 only.
  var hitsOnly: Bool { self == .bareLock || self == .rwLock || self == .noSync }

  /// Whether N concurrent callers needing a new model cause one authorization.
  var coalesces: Bool { self != .plainActor && !hitsOnly }

  /// Whether a cancelled waiter leaves at once while the flight goes on for the others.
  var cancelsWaiters: Bool { self == .coordinator }

  /// A one-line description for the report.
  var summary: String {
    switch self {
    case .coordinator: return "AuthCoordinator (module under test)"
    case .plainActor: return "actor, no coalescing (every caller that sees expiry authorizes)"
    case .sharedTask: return "actor + shared Task (callers await task.value)"
    case .callbackList: return "pending-callbacks list under a lock (AppAuth style)"
    case .serialBarrier: return "serial barrier, each call re-reads the store (Auth0 style)"
    case .bareLock: return "bare lock-protected read of the cached model (hit floor)"
    case .parkedTask: return "reference: caller parked on a bare continuation (heap/wake floor)"
    case .rwLock: return "the same read under a pthread_rwlock_t read lock"
    case .noSync: return "reference: the same read with no lock at all (hit floor)"
    }
  }

  /// Builds a fresh instance holding `seed`, authorizing through `fixture`.
  func make(
    seed: [AccountKey: AuthModel],
    fixture: AuthorizerFixture,
    now: @escaping @Sendable () -> Date,
    capacity: Int = 0
  ) -> any TokenSource {
    let authorize: Authorize = { key in try await fixture.authorize(key) }
    switch self {
    case .coordinator:
      return CoordinatorSource(seed: seed, fixture: fixture, now: now)
    case .plainActor:
      return PlainActorSource(seed: seed, authorize: authorize, now: now)
    case .sharedTask:
      return SharedTaskSource(seed: seed, authorize: authorize, now: now)
    case .callbackList:
      return CallbackListSource(seed: seed, authorize: authorize, now: now)
    case .serialBarrier:
      return SerialBarrierSource(seed: seed, authorize: authorize, now: now)
    case .bareLock:
      return BareLockSource(seed: seed, now: now)
    case .parkedTask:
      return ParkedTaskReference(authorize: authorize, capacity: capacity)
    case .rwLock:
      return RWLockSource(seed: seed, now: now)
    case .noSync:
      return NoSyncSource(seed: seed, now: now)
    }
  }
}
