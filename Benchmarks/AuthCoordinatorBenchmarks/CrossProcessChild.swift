import AuthCoordinator
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// B8's child process: `authcoord-bench --b8-child STORE CALLERS lease|none` (hidden; the
/// parent, `CrossProcess.runRepetition`, starts K of them on one store).
///
/// It opens the shared `FileTokenStore` (seeded by the parent with an expired model), builds a
/// coordinator with the store's `FileAuthorizationLease` (`lease`) or without one (`none`, the
/// baseline), prints `ready`, waits for `go` on stdin, fires CALLERS concurrent
/// `authModel(for:)` calls, prints one line of JSON (`ChildReport`) and waits for stdin to close
/// before it exits: a holder that exited before releasing its lease would leave the others
/// waiting for the lease to lapse, which is not what B8 measures.
enum CrossProcessChild {
  static let flag = "--b8-child"
  static let key = AccountKey(account: "b8")

  /// SIMULATED: how long the token endpoint takes. No network is involved.
  static let simulatedEndpoint: Duration = .milliseconds(20)

  /// The line a child prints when it is done.
  struct Report: Codable, Sendable {
    var pid: Int32
    /// `statistics.authorizationsStarted`.
    var authorizationsStarted: Int
    /// `statistics.adoptedFromStore`.
    var adoptedFromStore: Int
    /// The distinct access tokens this process's callers got.
    var tokens: [String]
    var served: Int
    var failed: Int
    /// Wall clock (`CLOCK_REALTIME`, ns) when this process's first caller got its model.
    var firstServedNanos: UInt64
    /// Wall clock (ns) when this process's save of a new model returned; nil when it saved
    /// nothing (it adopted the holder's model).
    var savedNanos: UInt64?
    /// Wall clock (ns) when this process's release of the lease returned; nil when it released
    /// none (or ran without the lease).
    var releasedNanos: UInt64?
    /// The first error a caller got, if any.
    var error: String?
  }

  /// Runs the child and returns its exit status.
  static func main(_ arguments: [String]) async -> Int32 {
    guard arguments.count == 3, let callers = Int(arguments[1]), callers > 0,
      arguments[2] == "lease" || arguments[2] == "none"
    else {
      FileHandle.standardError.write(Data("usage: \(flag) STORE CALLERS lease|none\n".utf8))
      return 2
    }
    let file = FileTokenStore(url: URL(fileURLWithPath: arguments[0]))
    let store = SaveTimedStore(file)
    let lease =
      arguments[2] == "lease" ? ReleaseTimedLease(FileAuthorizationLease(nextTo: file)) : nil
    let pid = getpid()
    let minted = LockedState(0)
    // SIMULATED token endpoint: sleeps `simulatedEndpoint`, then returns a new model whose
    // access token names this process (its pid), valid for two hours.
    let authorizer = ClosureAuthorizer { request in
      try await Task.sleep(for: simulatedEndpoint)
      let serial = minted.withLock { count -> Int in
        count += 1
        return count
      }
      return AuthModel(
        uid: "2088\(pid)", accessToken: "b8-pid\(pid)-\(serial)", mcUid: request.key.account,
        expiresAt: Date().addingTimeInterval(7200))
    }
    let coordinator = AuthCoordinator(store: store, lease: lease, authorizer: authorizer)
    say("ready")
    guard readLine() == "go" else { return 1 }

    struct Tally: Sendable {
      var served = 0
      var failed = 0
      var tokens: Set<String> = []
      var first = UInt64.max
      var error: String?
    }
    let tally = LockedState(Tally())
    var tasks: [Task<Void, Never>] = []
    tasks.reserveCapacity(callers)
    for _ in 0..<callers {
      tasks.append(
        Task.detached {
          do {
            let model = try await coordinator.authModel(for: key)
            let time = realtimeNanos()
            tally.withLock {
              $0.served += 1
              $0.tokens.insert(model.accessToken)
              $0.first = min($0.first, time)
            }
          } catch {
            tally.withLock {
              $0.failed += 1
              if $0.error == nil { $0.error = "\(error)" }
            }
          }
        })
    }
    for task in tasks { await task.value }
    // The holder releases its lease after its callers are served: wait for that (only the
    // report waits; every time in it is taken where it happened).
    if let lease, store.savedNanos != nil {
      for _ in 0..<10_000 where lease.releasedNanos == nil {
        try? await Task.sleep(for: .milliseconds(1))
      }
    }
    let counts = tally.withLock { $0 }
    let statistics = coordinator.statistics
    let report = Report(
      pid: pid, authorizationsStarted: statistics.authorizationsStarted,
      adoptedFromStore: statistics.adoptedFromStore, tokens: counts.tokens.sorted(),
      served: counts.served, failed: counts.failed,
      firstServedNanos: counts.first == .max ? 0 : counts.first, savedNanos: store.savedNanos,
      releasedNanos: lease?.releasedNanos, error: counts.error)
    do {
      say(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    } catch {
      return 1
    }
    // Stay until the parent has every report (it closes stdin).
    while readLine() != nil {}
    withExtendedLifetime(coordinator) {}
    return 0
  }

  /// One line on stdout, unbuffered (stdout is a pipe).
  private static func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
  }
}

/// The shared `FileTokenStore`, timing when a save returns (the holder's "save finished").
final class SaveTimedStore: TokenStore {
  let base: FileTokenStore
  private let saved = LockedState<UInt64?>(nil)

  init(_ base: FileTokenStore) { self.base = base }

  /// Wall clock (ns) when the first save returned, if any.
  var savedNanos: UInt64? { saved.withLock { $0 } }

  func model(for key: AccountKey) async throws -> AuthModel? { try await base.model(for: key) }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    try await base.save(model, for: key)
    let time = realtimeNanos()
    saved.withLock { $0 = $0 ?? time }
  }

  func removeModel(for key: AccountKey) async throws { try await base.removeModel(for: key) }

  func removeModels(forAccount account: String) async throws {
    try await base.removeModels(forAccount: account)
  }

  func removeAll() async throws { try await base.removeAll() }
}

/// The shared `FileAuthorizationLease`, timing when a release returns.
final class ReleaseTimedLease: AuthorizationLease {
  let base: FileAuthorizationLease
  private let released = LockedState<UInt64?>(nil)

  init(_ base: FileAuthorizationLease) { self.base = base }

  /// Wall clock (ns) when the first release returned, if any.
  var releasedNanos: UInt64? { released.withLock { $0 } }

  func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws -> LeaseAttempt {
    try await base.acquire(key, owner: owner, timeToLive: timeToLive)
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    try await base.renew(grant, timeToLive: timeToLive)
  }

  func release(_ grant: LeaseGrant) async throws {
    try await base.release(grant)
    let time = realtimeNanos()
    released.withLock { $0 = $0 ?? time }
  }

  func signOut(account: String, by owner: String) async throws {
    try await base.signOut(account: account, by: owner)
  }

  func signOutAll(by owner: String) async throws { try await base.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async throws {
    try await base.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async throws { try await base.revokeAllGrants() }

  func isCurrent(_ grant: LeaseGrant) async throws -> Bool { try await base.isCurrent(grant) }

  func changes() -> AsyncStream<LeaseChange> { base.changes() }
}

/// Wall-clock nanoseconds (`CLOCK_REALTIME`): shared by every process on the host.
func realtimeNanos() -> UInt64 {
  var spec = timespec()
  clock_gettime(CLOCK_REALTIME, &spec)
  return UInt64(spec.tv_sec) * 1_000_000_000 + UInt64(spec.tv_nsec)
}
