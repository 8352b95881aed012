import Foundation
import Testing
import TokenStore

@testable import AuthCoordinatorPostgreSQL

@Suite("PostgreSQL lease", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(2)))
struct PostgresLeaseTests {
  @Test(
    "one holder per key; a lapsed grant is taken over with a larger fence; renewals tell the truth")
  func grants() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let lease = PostgresAuthorizationLease(database: database)
    let key = AccountKey(account: "alice")
    let before = Date()
    guard
      case .acquired(let first) = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    #expect(first.owner == "A" && first.key == key)
    #expect(
      first.expiresAt > before.addingTimeInterval(25)
        && first.expiresAt <= Date().addingTimeInterval(30))
    guard
      case .heldElsewhere(let owner, let until) = try await lease.acquire(
        key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("a second holder got the key")
      return
    }
    #expect(owner == "A")
    #expect(abs(until.timeIntervalSince(first.expiresAt)) < 5)
    let renewed = try await lease.renew(first, timeToLive: .seconds(60))
    #expect(renewed?.fence == first.fence)
    #expect((renewed?.expiresAt ?? .distantPast) > first.expiresAt)

    // Lapse it on the database's clock: the next acquire takes it over.
    try await TestServer.admin(
      "UPDATE \(database.schema).leases SET expires_at = clock_timestamp() - interval '1 second'")
    guard
      case .acquired(let second) = try await lease.acquire(
        key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("no takeover of a lapsed grant")
      return
    }
    #expect(second.fence > first.fence)
    #expect(try await lease.renew(first, timeToLive: .seconds(30)) == nil)
    try await lease.release(first)  // not held: does nothing
    guard
      case .heldElsewhere(let holder, _) = try await lease.acquire(
        key, owner: "C", timeToLive: .seconds(30))
    else {
      Issue.record("the deposed holder's release freed the key")
      return
    }
    #expect(holder == "B")
    try await lease.release(second)
    try await lease.release(second)  // idempotent
    guard
      case .acquired(let third) = try await lease.acquire(key, owner: "C", timeToLive: .seconds(30))
    else {
      Issue.record("a released key stayed held")
      return
    }
    #expect(third.fence > second.fence)
  }

  @Test("fences grow across keys and across replicas")
  func fencesGrow() async throws {
    let schema = TestServer.freshSchema()
    let one = try await TestServer.database(schema: schema)
    let two = try await TestServer.database(schema: schema)
    defer {
      one.close()
      two.close()
    }
    var fences: [UInt64] = []
    for index in 0..<6 {
      let lease = PostgresAuthorizationLease(database: index.isMultiple(of: 2) ? one : two)
      guard
        case .acquired(let grant) = try await lease.acquire(
          AccountKey(account: "user-\(index)"), owner: "o\(index)", timeToLive: .seconds(5))
      else {
        Issue.record("refused")
        return
      }
      fences.append(grant.fence)
    }
    #expect(fences == fences.sorted() && Set(fences).count == fences.count)
  }

  @Test("a sign-out makes earlier grants of the account not current, and only those")
  func signOutGenerations() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let lease = PostgresAuthorizationLease(database: database)
    func grant(_ account: String, mode: AuthMode = .platformOnly) async throws -> LeaseGrant {
      guard
        case .acquired(let grant) = try await lease.acquire(
          AccountKey(account: account, mode: mode), owner: "A", timeToLive: .seconds(30))
      else { throw PostgresError(.badReply, "refused") }
      return grant
    }
    let alice = try await grant("alice")
    let bob = try await grant("bob")
    #expect(try await lease.isCurrent(alice))
    try await lease.revokeGrants(ofAccount: "alice")
    #expect(!(try await lease.isCurrent(alice)))
    #expect(try await lease.isCurrent(bob))
    let aliceAgain = try await grant("alice", mode: "other")
    #expect(try await lease.isCurrent(aliceAgain))
    try await lease.signOut(account: "bob", by: "A")
    #expect(!(try await lease.isCurrent(bob)))
    #expect(try await lease.isCurrent(aliceAgain))
    try await lease.revokeAllGrants()
    #expect(!(try await lease.isCurrent(aliceAgain)))
    let carol = try await grant("carol")
    #expect(try await lease.isCurrent(carol))
    try await lease.signOutAll(by: "A")
    #expect(!(try await lease.isCurrent(carol)))
  }

  @Test(
    "another replica hears a release by key, and sign-outs by account; a silent revoke says nothing"
  )
  func changesAcrossReplicas() async throws {
    let schema = TestServer.freshSchema()
    let one = try await TestServer.database(schema: schema)
    let two = try await TestServer.database(schema: schema)
    defer {
      one.close()
      two.close()
    }
    let holder = PostgresAuthorizationLease(database: one)
    let waiter = PostgresAuthorizationLease(database: two)
    let key = AccountKey(account: "alice")
    let changes = waiter.changes()
    guard
      case .acquired(let grant) = try await holder.acquire(
        key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    guard case .heldElsewhere = try await waiter.acquire(key, owner: "B", timeToLive: .seconds(30))
    else {
      Issue.record("a second holder")
      return
    }
    try await holder.release(grant)
    #expect(await first(of: changes) { $0 == .released(key) } == .released(key))

    try await holder.revokeGrants(ofAccount: "quiet")
    try await holder.signOut(account: "alice", by: "A")
    let signOut = await first(of: changes) {
      if case .signedOut = $0 { return true }
      return false
    }
    #expect(signOut == .signedOut(account: "alice", by: "A"))
    try await holder.signOutAll(by: "A")
    #expect(await first(of: changes) { $0 == .signedOutAll(by: "A") } == .signedOutAll(by: "A"))
  }

  @Test("a listener whose connection is terminated reconnects and reads the sign-outs it missed")
  func listenerReconnects() async throws {
    let schema = TestServer.freshSchema()
    let listenerName = "listener-\(schema)"
    let one = try await TestServer.database(schema: schema)
    let two = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: listenerName))
    defer {
      one.close()
      two.close()
    }
    let holder = PostgresAuthorizationLease(database: one)
    let waiter = PostgresAuthorizationLease(database: two)
    let changes = waiter.changes()
    // The listener announces `unknown` once LISTEN runs.
    #expect(await first(of: changes) { $0 == .unknown } == .unknown)
    let terminated = try await TestServer.terminate(applicationName: listenerName, queryPrefix: "")
    #expect(terminated >= 1)
    try await holder.signOut(account: "missed", by: "A")
    let heard = await first(of: changes) { $0 == .signedOut(account: "missed", by: "A") }
    #expect(heard == .signedOut(account: "missed", by: "A"))
  }

  @Test(
    "a holder's connections terminated mid-hold: once its grant lapses and is taken over, its renewal fails and its save is refused by the fence"
  )
  func terminatedHolderIsFenced() async throws {
    let schema = TestServer.freshSchema()
    let holderName = "holder-\(schema)"
    let holderDatabase = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: holderName))
    let otherDatabase = try await TestServer.database(schema: schema)
    defer {
      holderDatabase.close()
      otherDatabase.close()
    }
    let key = AccountKey(account: "alice")
    let holderLease = PostgresAuthorizationLease(database: holderDatabase)
    let holderStore = PostgresTokenStore(database: holderDatabase)
    let otherLease = PostgresAuthorizationLease(database: otherDatabase)
    let otherStore = PostgresTokenStore(database: otherDatabase)
    guard
      case .acquired(let stale) = try await holderLease.acquire(
        key, owner: "holder", timeToLive: .seconds(30))
    else {
      Issue.record("the first acquire was refused")
      return
    }
    // The holder's sessions end under it, and it stays away past its time to live (the lapse
    // is made on the database's clock, the lease's only clock).
    #expect(try await TestServer.terminate(applicationName: holderName) >= 1)
    try await TestServer.admin(
      "UPDATE \(schema).leases SET expires_at = clock_timestamp() - interval '1 second'")
    guard
      case .acquired(let fresh) = try await otherLease.acquire(
        key, owner: "other", timeToLive: .seconds(30))
    else {
      Issue.record("the lapsed grant was not taken over")
      return
    }
    #expect(fresh.fence > stale.fence)
    #expect(
      try await otherStore.save(
        sampleModel(account: "alice", token: "AT-other", refresh: "RT-other"), for: key,
        fence: fresh.fence))

    // The holder comes back: its pool reconnects (a terminated connection costs at most one
    // failed call each), and what it learns is that it no longer holds the key.
    let renewed = try await retryingTransient(holderDatabase) {
      try await holderLease.renew(stale, timeToLive: .seconds(30))
    }
    #expect(renewed == nil)
    let saved = try await retryingTransient(holderDatabase) {
      try await holderStore.save(
        sampleModel(account: "alice", token: "AT-stale", refresh: "RT-stale"), for: key,
        fence: stale.fence)
    }
    #expect(saved == false)
    #expect(try await otherStore.model(for: key)?.accessToken == "AT-other")
  }

  @Test(
    "a deposed holder's save whose statement began before the takeover is refused, or its model is what the new holder reads",
    arguments: [false, true])
  func saveRacingATakeover(readWithTheGrant: Bool) async throws {
    let schema = TestServer.freshSchema()
    let holderName = "racer-\(schema)"
    let takerName = "taker-\(schema)"
    let holderDatabase = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: holderName))
    let takerDatabase = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: takerName))
    let locker = try await TestServer.lockingSession(schema: schema)
    defer {
      holderDatabase.close()
      takerDatabase.close()
      locker.close()
    }
    let key = AccountKey(account: "alice")
    let holderStore = PostgresTokenStore(database: holderDatabase)
    let takerStore = PostgresTokenStore(database: takerDatabase)
    // The new holder re-reads in a second statement, or in the acquire's round trip.
    let takerLease = PostgresAuthorizationLease(
      database: takerDatabase, readingFrom: readWithTheGrant ? takerStore : nil)
    try await holderStore.save(sampleModel(account: "alice", token: "AT-0"), for: key)
    guard
      case .acquired(let stale) = try await PostgresAuthorizationLease(database: holderDatabase)
        .acquire(key, owner: "holder", timeToLive: .seconds(30))
    else {
      Issue.record("the first acquire was refused")
      return
    }
    try await TestServer.admin(
      "UPDATE \(schema).leases SET expires_at = clock_timestamp() - interval '1 second'")

    // The holder's save starts (its statement's snapshot sees only its own grant) and stalls
    // on the model row, which another session holds locked.
    _ = try await locker.execute("BEGIN")
    _ = try await locker.execute("SELECT 1 FROM \(schema).models FOR UPDATE")
    let save = Task {
      try await holderStore.save(
        sampleModel(account: "alice", token: "AT-holder", refresh: "RT-holder"), for: key,
        fence: stale.fence)
    }
    #expect(try await TestServer.waitUntilBlocked(applicationName: holderName, orDone: save))
    // Meanwhile the lapsed grant is taken over and the new holder re-reads the store, as the
    // coordinator does before it spends the refresh token.
    let takeover = Task { () -> (LeaseAttempt, AuthModel?) in
      let attempt = try await takerLease.acquire(key, owner: "taker", timeToLive: .seconds(30))
      if case .acquired(let grant) = attempt, case .read(let model) = grant.storeRead {
        #expect(readWithTheGrant)
        return (attempt, model)
      }
      #expect(!readWithTheGrant, "the grant carried no read")
      return (attempt, try await takerStore.model(for: key))
    }
    // The takeover either finishes at once or waits on the stalled save's lock.
    _ = try await TestServer.waitUntilBlocked(applicationName: takerName, orDone: takeover)
    _ = try await locker.execute("COMMIT")

    let saved = try await save.value
    let (attempt, reread) = try await takeover.value
    guard case .acquired(let fresh) = attempt else {
      Issue.record("the lapsed grant was not taken over: \(attempt)")
      return
    }
    #expect(fresh.fence > stale.fence)
    // Never both: a save that landed after the new holder read the store (it would spend the
    // refresh token the deposed holder already spent).
    #expect(
      !saved || reread?.accessToken == "AT-holder",
      "the deposed holder's save landed (\(saved)) but the new holder read \(reread?.accessToken ?? "nil")"
    )
  }

  /// Runs `body`, again after each transient failure, at most once per pooled connection
  /// (a connection the server terminated fails one call, then reconnects).
  private func retryingTransient<T>(
    _ database: PostgresDatabase, _ body: () async throws -> T
  ) async throws -> T {
    for _ in 0..<database.configuration.poolSize {
      do { return try await body() } catch let error as PostgresError where error.isTransient {
        continue
      }
    }
    return try await body()
  }

  @Test("the listener connects with a connection string of its own, and hears sign-outs through it")
  func listenerConnectionString() async throws {
    let schema = TestServer.freshSchema()
    let name = "own-listener-\(schema)"
    // The pool over TCP, the listener over the server's Unix socket (what a deployment behind
    // PgBouncer in transaction mode does with a direct address for the listener).
    let socket = try #require(
      try await TestServer.admin("SHOW unix_socket_directories").first?[0]?
        .split(separator: ",").first.map(String.init))
    let port = try #require(try await TestServer.admin("SHOW port").first?[0])
    var configuration = TestServer.configuration(schema: schema, applicationName: name)
    configuration.listenerConnectionString =
      "host=\(socket) port=\(port) dbname=postgres user=postgres"
    let database = try await PostgresDatabase(configuration)
    let other = try await TestServer.database(schema: schema)
    defer {
      database.close()
      other.close()
    }
    let lease = PostgresAuthorizationLease(database: database)
    let changes = lease.changes()
    #expect(await first(of: changes) { $0 == .unknown } == .unknown)
    let sessions = try await TestServer.admin(
      """
      SELECT count(*) FILTER (WHERE client_addr IS NULL), count(*) FILTER (WHERE client_addr IS NOT NULL)
      FROM pg_stat_activity WHERE application_name = $1
      """, [.text(name)])
    #expect(sessions.first?[0] == "1", "one session over the socket: the listener")
    try await PostgresAuthorizationLease(database: other).signOut(account: "alice", by: "B")
    #expect(
      await first(of: changes) { $0 == .signedOut(account: "alice", by: "B") }
        == .signedOut(account: "alice", by: "B"))
    withExtendedLifetime(lease) {}
  }

  @Test("a pooled connection terminated by the server costs at most one failed call")
  func poolReconnects() async throws {
    let schema = TestServer.freshSchema()
    let name = "pool-\(schema)"
    let database = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: name))
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let key = AccountKey(account: "alice")
    try await store.save(sampleModel(account: "alice"), for: key)
    #expect(try await TestServer.terminate(applicationName: name) >= 1)
    var failures: [PostgresError] = []
    var read: AuthModel?
    for _ in 0..<(2 * database.configuration.poolSize + 1) where read == nil {
      do {
        read = try await store.model(for: key)
      } catch let error as PostgresError {
        failures.append(error)
      }
    }
    #expect(read == sampleModel(account: "alice"))
    #expect(failures.count <= database.configuration.poolSize)
    let transient = failures.allSatisfy { $0.isTransient }
    #expect(transient, "\(failures)")
  }

  @Test(
    "a pooled connection the server ended while it was idle costs no failed call: the pool opens another first"
  )
  func poolReplacesAConnectionEndedWhileIdle() async throws {
    let schema = TestServer.freshSchema()
    let name = "idle-\(schema)"
    let database = try await PostgresDatabase(
      TestServer.configuration(schema: schema, applicationName: name))
    defer { database.close() }
    let store = PostgresTokenStore(database: database)
    let lease = PostgresAuthorizationLease(database: database, readingFrom: store)
    let key = AccountKey(account: "alice")
    // Both of the pool's connections open and go idle.
    async let first: Void = store.save(sampleModel(account: "alice"), for: key)
    async let second = store.model(for: key)
    _ = try await (first, second)
    // An administrator ends the sessions (as an idle timeout, a failover or a shutdown would);
    // each session's process has exited, so its goodbye is on the socket, before any call.
    for round in 1...2 {
      let ended = try await TestServer.terminate(applicationName: name, waitingForExit: true)
      #expect(ended >= 1, "round \(round): no pooled session to end")
      for _ in 0..<(2 * database.configuration.poolSize + 1) {
        #expect(try await store.model(for: key) == sampleModel(account: "alice"))
      }
      guard
        case .acquired(let grant) = try await lease.acquire(
          key, owner: "A", timeToLive: .seconds(5))
      else {
        Issue.record("round \(round): the lease was refused")
        return
      }
      try await lease.release(grant)
    }
    withExtendedLifetime(lease) {}
  }

  @Test("an idle connection sent something else than a goodbye (a notification) is kept")
  func idleConnectionSentANotificationIsKept() async throws {
    let configuration = TestServer.configuration(
      schema: TestServer.freshSchema(), applicationName: "idle-kept")
    let connection = try PostgresConnection.open(
      configuration, redactor: Redactor(connectionStrings: [configuration.connectionString]),
      deadline: .now + .seconds(5))
    _ = try connection.execute("LISTEN idle_kept", until: .now + .seconds(5))
    try await TestServer.admin("NOTIFY idle_kept, 'hello'")
    // The notification reaches the idle connection's socket when the server sends it; only the
    // check reads the socket here (a deadline already past makes `notifications` read nothing).
    var received: [(String, String)] = []
    let limit = ContinuousClock.now + .seconds(5)
    while received.isEmpty, ContinuousClock.now < limit {
      #expect(!connection.endedWhileIdle())
      received = try connection.notifications(until: .now)
      if received.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
    }
    #expect(received.map(\.1) == ["hello"])
    #expect(!connection.isBroken)
    #expect(try connection.execute("SELECT 1", until: .now + .seconds(5)).first?[0] == "1")
  }

  @Test(
    "a call blocked in the database ends at the lock timeout, or at the call timeout with its connection closed"
  )
  func blockedCallsEnd() async throws {
    let schema = TestServer.freshSchema()
    // The blocker opens first, so the schema is created under the default time limits: the
    // quick database's 300 ms are for the blocked call, not for a migration on a busy machine.
    let blocker = try await PostgresDatabase(
      PostgresConfiguration(
        connectionString: TestServer.connectionString ?? "", schema: schema, poolSize: 1))
    let quick = try await PostgresDatabase(
      TestServer.configuration(schema: schema, statementTimeout: .milliseconds(300)))
    let patient = try await PostgresDatabase(
      TestServer.configuration(
        schema: schema, statementTimeout: .seconds(60), callTimeout: .milliseconds(600)))
    defer {
      quick.close()
      patient.close()
      blocker.close()
    }
    // One session holds the models table's lock in an open transaction.
    try await blocker.pool.run { connection, deadline in
      _ = try connection.execute("BEGIN", until: deadline)
      _ = try connection.execute(
        "LOCK TABLE \(schema).models IN ACCESS EXCLUSIVE MODE", until: deadline)
    }
    let key = AccountKey(account: "alice")
    let lockError = await #expect(throws: PostgresError.self) {
      _ = try await PostgresTokenStore(database: quick).model(for: key)
    }
    // lock_timeout (55P03) or statement_timeout (57014), whichever the server fires first.
    #expect(lockError?.code == .statementFailed)
    #expect(
      ["55P03", "57014"].contains(lockError?.sqlState ?? ""), "\(String(describing: lockError))")
    #expect(lockError?.isTransient == true)
    let started = ContinuousClock.now
    let timeout = await #expect(throws: PostgresError.self) {
      _ = try await PostgresTokenStore(database: patient).model(for: key)
    }
    #expect(timeout?.code == .timedOut)
    #expect(started.duration(to: .now) < .seconds(30))
    try await blocker.pool.run { connection, deadline in
      _ = try connection.execute("ROLLBACK", until: deadline)
    }
    // The timed-out connection was closed; the next call opens another and succeeds.
    #expect(try await PostgresTokenStore(database: patient).model(for: key) == nil)
  }

  @Test("an unreachable server fails fast with connection_failed and never shows the password")
  func unreachableServer() async throws {
    let port = 9  // discard: nothing listens on it here, so the connection is refused
    let configuration = PostgresConfiguration(
      connectionString: "host=127.0.0.1 port=\(port) user=svc password=pa55-w0rd-secret dbname=x",
      connectTimeout: .seconds(2))
    #expect(!configuration.description.contains("pa55"))
    let error = await #expect(throws: PostgresError.self) {
      _ = try await PostgresDatabase(configuration)
    }
    #expect(error?.code == .connectionFailed)
    #expect(!(error?.description.contains("pa55-w0rd-secret") ?? true))
    #expect(error?.isTransient == true)
  }

  @Test("the password is redacted from libpq's messages")
  func redaction() {
    let redactor = Redactor(
      connectionStrings: ["host=h password='s3cr3t pass' user=u", "host=l password=l1stener"])
    #expect(redactor.redact("l1stener failed") == "<redacted> failed")
    #expect(redactor.redact("failed for s3cr3t pass at h") == "failed for <redacted> at h")
    let uri = Redactor(connectionStrings: ["postgresql://u:hunter22@h/db"])
    #expect(uri.redact("x hunter22 y") == "x <redacted> y")
  }
}
