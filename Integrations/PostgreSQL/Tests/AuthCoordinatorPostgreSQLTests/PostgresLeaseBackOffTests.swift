import AuthCoordinator
import Foundation
import Synchronization
import Testing

@testable import AuthCoordinatorPostgreSQL

/// Back-offs through the PostgreSQL lease (schema version 3): a holder whose authorization
/// failed releases its grant with a back-off, and until it lapses on the database's clock every
/// replica is told to back off.
@Suite(
  "PostgreSQL lease back-offs", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(2)))
struct PostgresLeaseBackOffTests {
  let backOff = LeaseBackOff(duration: .seconds(30), failures: 2, code: "network_error")

  @Test(
    "a back-off keeps every replica off the key until it lapses, is announced as a release, and a deposed holder's changes nothing"
  )
  func backOffAcrossReplicas() async throws {
    let schema = TestServer.freshSchema()
    let one = try await TestServer.database(schema: schema)
    let two = try await TestServer.database(schema: schema)
    defer {
      one.close()
      two.close()
    }
    let holder = PostgresAuthorizationLease(database: one)
    let other = PostgresAuthorizationLease(database: two)
    let key = AccountKey(account: "alice")
    let changes = other.changes()
    // The listener announces `unknown` once LISTEN runs: from then on it hears every release.
    #expect(await first(of: changes) { $0 == .unknown } == .unknown)
    guard
      case .acquired(let grant) = try await holder.acquire(
        key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    // A waiter (which learns the key's digest from its answer, as notifications name digests).
    guard case .heldElsewhere = try await other.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("a second holder")
      return
    }
    try await holder.release(grant, backingOff: backOff)
    #expect(await first(of: changes) { $0 == .released(key) } == .released(key))
    for (lease, owner) in [(other, "B"), (holder, "A")] {
      let attempt = try await lease.acquire(key, owner: owner, timeToLive: .seconds(30))
      guard case .backingOff(let until, let failures, let code) = attempt else {
        Issue.record("\(owner) was not told to back off: \(attempt)")
        continue
      }
      #expect(abs(until.timeIntervalSinceNow - 30) < 5)
      #expect(failures == 2 && code == "network_error")
    }
    // The released grant is no one's: it neither renews nor lifts the back-off.
    #expect(try await holder.renew(grant, timeToLive: .seconds(30)) == nil)
    try await holder.release(grant)
    guard case .backingOff = try await other.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("a stale release lifted the back-off")
      return
    }

    // Lapsed on the database's clock: taken over as a lapsed grant is, the back-off cleared.
    try await TestServer.admin(
      "UPDATE \(schema).leases SET expires_at = clock_timestamp() - interval '1 second'")
    guard
      case .acquired(let next) = try await other.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("not granted after the back-off")
      return
    }
    #expect(next.fence > grant.fence + 1)
    let row = try await TestServer.admin(
      "SELECT owner, backoff_failures, backoff_code FROM \(schema).leases")
    #expect(row.rows.map { $0.map { $0 ?? "NULL" } } == [["B", "NULL", "NULL"]])
    // A deposed holder's back-off does not touch its successor's grant.
    try await holder.release(grant, backingOff: backOff)
    let attempt = try await holder.acquire(key, owner: "A", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, _) = attempt else {
      Issue.record("the successor lost its grant: \(attempt)")
      return
    }
    #expect(owner == "B")
  }

  enum Revocation: CaseIterable, Sendable { case revokeAccount, revokeAll, signOut, signOutAll }

  /// Issue 7: a logout or `invalidate` did not end a back-off recorded in the lease row, so no
  /// replica authorized the account again (a user signing in anew included) until it ran out,
  /// up to an hour with `Retry-After`.
  @Test(
    "a logout's revocation and sign-out end the back-offs of every key of the account, in every replica, and only back-offs",
    arguments: Revocation.allCases)
  func aSignOutEndsTheAccountsBackOffs(_ revocation: Revocation) async throws {
    let schema = TestServer.freshSchema()
    let one = try await TestServer.database(schema: schema)
    let two = try await TestServer.database(schema: schema)
    defer {
      one.close()
      two.close()
    }
    let holder = PostgresAuthorizationLease(database: one)
    let other = PostgresAuthorizationLease(database: two)
    let long = LeaseBackOff(duration: .seconds(3600), failures: 3, code: "network_error")
    let user = [AccountKey(account: "dave"), AccountKey(account: "dave", mode: "admin")]
    // An account whose name the user's is a prefix of: its keys' digests share nothing.
    let otherUser = AccountKey(account: "dave2")
    for key in user + [otherUser] {
      guard
        case .acquired(let grant) = try await holder.acquire(
          key, owner: "A", timeToLive: .seconds(30))
      else {
        Issue.record("\(key) refused")
        return
      }
      try await holder.release(grant, backingOff: long)
    }
    // A live grant of the user: a revocation makes it not current, but it stays its holder's.
    let heldKey = AccountKey(account: "dave", mode: "held")
    guard
      case .acquired(let held) = try await holder.acquire(
        heldKey, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    switch revocation {
    case .revokeAccount: try await holder.revokeGrants(ofAccount: "dave")
    case .revokeAll: try await holder.revokeAllGrants()
    case .signOut: try await holder.signOut(account: "dave", by: "A")
    case .signOutAll: try await holder.signOutAll(by: "A")
    }
    for key in user {
      let attempt = try await other.acquire(key, owner: "B", timeToLive: .seconds(30))
      guard case .acquired = attempt else {
        Issue.record("\(key) still refused after \(revocation): \(attempt)")
        continue
      }
    }
    let attempt = try await other.acquire(otherUser, owner: "B", timeToLive: .seconds(30))
    switch (revocation, attempt) {
    case (.revokeAccount, .backingOff), (.signOut, .backingOff): break
    case (.revokeAll, .acquired), (.signOutAll, .acquired): break
    default: Issue.record("another account after \(revocation): \(attempt)")
    }
    let stillHeld = try await other.acquire(heldKey, owner: "B", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, _) = stillHeld else {
      Issue.record("a live grant was ended by \(revocation): \(stillHeld)")
      return
    }
    #expect(owner == "A")
    #expect(try await !holder.isCurrent(held))
  }

  @Test(
    "a version 4 schema is migrated in place: its back-offs are kept, a sign-out of everyone ends them, and the back-offs written after it end with their account's"
  )
  func migrationFromVersion4() async throws {
    let schema = TestServer.freshSchema()
    let key = AccountKey(account: "frank")
    let long = LeaseBackOff(duration: .seconds(3600), failures: 3, code: "network_error")
    // A back-off as a replica of version 4 wrote it: no account_hash column.
    let old = try await TestServer.database(schema: schema)
    let oldLease = PostgresAuthorizationLease(database: old)
    guard
      case .acquired(let grant) = try await oldLease.acquire(
        key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    try await oldLease.release(grant, backingOff: long)
    old.close()
    try await TestServer.admin("ALTER TABLE \(schema).leases DROP COLUMN account_hash")
    try await TestServer.admin("UPDATE \(schema).schema_version SET version = 4")

    let database = try await TestServer.database(schema: schema)
    defer { database.close() }
    let versions = try await TestServer.admin("SELECT max(version) FROM \(schema).schema_version")
    #expect(versions.rows.map { $0[0] } == [String(PostgresSchema.version)])
    let lease = PostgresAuthorizationLease(database: database)
    // Whose the old back-off is, the row does not say: it lapses on its own, or ends with
    // everyone's sign-out.
    try await lease.revokeGrants(ofAccount: key.account)
    guard case .backingOff = try await lease.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("the migration lost the back-off")
      return
    }
    try await lease.signOutAll(by: "B")
    guard
      case .acquired(let next) = try await lease.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("still backing off after everyone's sign-out")
      return
    }
    try await lease.release(next, backingOff: long)
    try await lease.revokeGrants(ofAccount: key.account)
    let attempt = try await lease.acquire(key, owner: "B", timeToLive: .seconds(30))
    guard case .acquired = attempt else {
      Issue.record("a back-off written after the migration outlived its account's revocation")
      return
    }
  }

  @Test(
    "version 2's acquire_lease, as replicas of the previous release call it, sees a back-off as a holder with no owner and clears it when taking the row over"
  )
  func previousVersionsAcquire() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let schema = database.schema
    let lease = PostgresAuthorizationLease(database: database)
    let key = AccountKey(account: "bob")
    let keyText = try KeyText.key(key)
    guard
      case .acquired(let grant) = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    try await lease.release(grant, backingOff: backOff)
    let old = "SELECT r_acquired, r_owner FROM \(schema).acquire_lease($1, 'old', 30000000)"
    #expect(try await database.execute(old, [.text(keyText)]).rows == [["f", ""]])
    try await TestServer.admin(
      "UPDATE \(schema).leases SET expires_at = clock_timestamp() - interval '1 second'")
    #expect(try await database.execute(old, [.text(keyText)]).rows == [["t", "old"]])
    // The new version sees the old replica's grant as a grant, not as a back-off.
    let attempt = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    guard case .heldElsewhere(let owner, _) = attempt else {
      Issue.record("an old replica's grant read as \(attempt)")
      return
    }
    #expect(owner == "old")
  }

  @Test(
    "3 replicas against a token endpoint that always fails: at least one back-off between any two token requests of the fleet"
  )
  func fleetBacksOffAsOne() async throws {
    let schema = TestServer.freshSchema()
    let calls = Mutex<[ContinuousClock.Instant]>([])
    // Simulated: an identity provider that is down. Every call fails transiently.
    let authorizer = ClosureAuthorizer(isInteractive: false) { _ in
      calls.withLock { $0.append(.now) }
      throw AuthCoordinatorError(.networkError, "simulated outage")
    }
    var silent = SilentRefreshPolicy.recommended
    silent.maxAttempts = 1
    silent.retryDelay = .seconds(1)
    var databases: [PostgresDatabase] = []
    var replicas: [AuthCoordinator] = []
    for _ in 0..<3 {
      let database = try await TestServer.database(schema: schema)
      databases.append(database)
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(30))
      configuration.silentRefresh = silent
      // The jitter pinned at its top: the back-offs are 1 s, 2 s, 4 s, ...
      configuration.random = { 1 }
      replicas.append(
        AuthCoordinator(
          store: PostgresTokenStore(database: database),
          lease: PostgresAuthorizationLease(database: database), authorizer: authorizer,
          configuration: configuration))
    }
    defer {
      for database in databases { database.close() }
    }
    let key = AccountKey(account: "carol")
    let start = ContinuousClock.now
    // Every replica asks over and over for 4 s; each answer is an error.
    await withTaskGroup(of: Void.self) { group in
      for replica in replicas {
        group.addTask {
          while ContinuousClock.now - start < .seconds(4) {
            _ = try? await replica.authModel(for: key)
            try? await Task.sleep(for: .milliseconds(20))
          }
        }
      }
    }
    let elapsed = ContinuousClock.now - start
    let times = calls.withLock { $0 }
    #expect(!times.isEmpty)
    // The database's clock keeps the whole fleet off the key for each back-off: never two token
    // requests less than the first back-off apart, however many replicas asked meanwhile.
    let gaps = zip(times.dropFirst(), times).map { $0 - $1 }
    #expect(gaps.allSatisfy { $0 >= .milliseconds(900) }, "\(gaps)")
    // No more than one request per step of 1 s, 2 s, 4 s... in the time the test ran.
    var steps = 0
    var total = Duration.zero
    var step = Duration.seconds(1)
    while total + step <= elapsed + .milliseconds(100) {
      total += step
      step *= 2
      steps += 1
    }
    #expect(times.count <= 1 + steps, "\(times.count) token requests in \(elapsed)")
  }
}
