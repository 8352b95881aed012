import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import AuthCoordinatorPostgreSQL

/// Coordinators as replicas: each with a database (a pool and a listener) of its own, all on one
/// schema, in one process. The multi-process version is `FleetProcessTests`.
@Suite(
  "Coordinators sharing PostgreSQL", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(3)))
struct FleetCoordinatorTests {
  /// A replica: its database, store, lease and coordinator.
  struct Replica {
    let database: PostgresDatabase
    let store: PostgresTokenStore
    let coordinator: AuthCoordinator
  }

  static func replicas(
    _ count: Int, schema: String, issuer: SimulatedIssuer, maxForcedAuthorizations: Int = 3
  ) async throws -> [Replica] {
    var replicas: [Replica] = []
    for index in 0..<count {
      let database = try await TestServer.database(schema: schema)
      let store = PostgresTokenStore(database: database)
      // Half the replicas re-read the store with the grant, half in a read of their own.
      let lease = PostgresAuthorizationLease(
        database: database, readingFrom: index.isMultiple(of: 2) ? store : nil)
      let coordinator = AuthCoordinator(
        store: store, lease: lease,
        authorizer: issuer.authorizer,
        configuration: AuthCoordinator.Configuration(
          authorizationTimeout: .seconds(30), maxForcedAuthorizations: maxForcedAuthorizations))
      replicas.append(Replica(database: database, store: store, coordinator: coordinator))
    }
    return replicas
  }

  @Test(
    "4 replicas × 250 callers on an expired model: 1 authorization, one token, the newest refresh token spent"
  )
  func oneAuthorizationForTheFleet() async throws {
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .milliseconds(300))
    let replicas = try await Self.replicas(4, schema: schema, issuer: issuer)
    defer {
      for replica in replicas { replica.database.close() }
    }
    let key = AccountKey(account: "alice")
    let expired = issuer.expiredModel(for: "alice")
    try await replicas[0].store.save(expired, for: key)
    let tokens = try await withThrowingTaskGroup(of: String.self) { group in
      for replica in replicas {
        for _ in 0..<250 {
          group.addTask { try await replica.coordinator.authModel(for: key).accessToken }
        }
      }
      return try await group.reduce(into: [String]()) { $0.append($1) }
    }
    #expect(tokens.count == 1000)
    #expect(Set(tokens).count == 1)
    #expect(issuer.spent == [try #require(expired.refreshToken)])
    #expect(issuer.reuses == 0)
  }

  @Test("forced refreshes in turn across replicas never spend a refresh token twice")
  func rotationAcrossReplicas() async throws {
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .zero)
    // Forced refreshes in a row are what the loop guard backs off from; not here.
    let replicas = try await Self.replicas(
      3, schema: schema, issuer: issuer, maxForcedAuthorizations: 1_000)
    defer {
      for replica in replicas { replica.database.close() }
    }
    let key = AccountKey(account: "bob")
    try await replicas[0].store.save(issuer.expiredModel(for: "bob"), for: key)
    var model = try await replicas[0].coordinator.authModel(for: key)
    for round in 0..<30 {
      // Every replica rejects the token it was last served, concurrently.
      let rejected = model.accessToken
      model = try await withThrowingTaskGroup(of: AuthModel.self) { group in
        for replica in replicas {
          group.addTask {
            try await replica.coordinator.authModel(for: key, refresh: .force(rejecting: rejected))
          }
        }
        var last: AuthModel?
        for try await served in group { last = served }
        return last!
      }
      #expect(model.accessToken != rejected, "round \(round)")
    }
    #expect(issuer.reuses == 0)
    #expect(issuer.spent.count == Set(issuer.spent).count)
    #expect(issuer.spent.count >= 31)
  }

  @Test("a logout in one replica: the others stop serving the old model and authorize anew")
  func logoutAcrossReplicas() async throws {
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .zero)
    let replicas = try await Self.replicas(2, schema: schema, issuer: issuer)
    defer {
      for replica in replicas { replica.database.close() }
    }
    let key = AccountKey(account: "carol")
    let old = try await replicas[0].coordinator.authModel(for: key)
    #expect(try await replicas[1].coordinator.authModel(for: key) == old)
    let events = replicas[1].coordinator.events
    let started = ContinuousClock.now
    await replicas[0].coordinator.accountStatusChanged(.logout(account: "carol"))
    let heard = await first(of: events) {
      if case .signedOutElsewhere(let account) = $0 { return account == "carol" }
      return false
    }
    #expect(heard != nil)
    let elapsed = started.duration(to: .now)
    let fresh = try await replicas[1].coordinator.authModel(for: key)
    #expect(fresh.accessToken != old.accessToken)
    #expect(issuer.authorizations == 2)
    print("logout heard by the other replica after \(elapsed)")
  }

  @Test(
    "with the database gone, a valid cached token is still served, and a refresh fails by its deadline"
  )
  func databaseDown() async throws {
    let schema = TestServer.freshSchema()
    let issuer = SimulatedIssuer(delay: .zero)
    let replicas = try await Self.replicas(1, schema: schema, issuer: issuer)
    let replica = replicas[0]
    let key = AccountKey(account: "dave")
    let model = try await replica.coordinator.authModel(for: key)
    replica.database.close()
    for _ in 0..<100 { #expect(try await replica.coordinator.authModel(for: key) == model) }
    let started = ContinuousClock.now
    await #expect(throws: (any Error).self) {
      _ = try await replica.coordinator.authModel(
        for: key, refresh: .force(rejecting: model.accessToken), timeout: .seconds(5))
    }
    #expect(started.duration(to: .now) < .seconds(6))
    #expect(issuer.authorizations == 1)
  }
}

/// A SIMULATED identity provider, in memory: the TestKit's ``RotatingTokenIssuer`` (the
/// rotation rules every simulated server here shares) behind a lock. It counts authorizations
/// and records every refresh token spent; a second spend is a reuse, which revokes the family.
final class SimulatedIssuer: @unchecked Sendable {
  struct InvalidGrant: Error, CustomStringConvertible {
    let refusal: RotatingTokenIssuer.Refusal
    var description: String { "invalid_grant: \(refusal)" }
  }

  private struct State {
    var issuer = RotatingTokenIssuer(accessTokenPrefix: "AT", refreshTokenPrefix: "RT")
    var authorizations = 0
    var spent: [String] = []
  }

  private let delay: Duration
  private let lock = NSLock()
  private var state = State()

  init(delay: Duration) { self.delay = delay }

  /// A new family's first model, expired a minute ago: what every replica finds at the start.
  func expiredModel(for account: String) -> AuthModel {
    let issued = locked { $0.issuer.startFamily(at: Date(), lifetime: .seconds(-60)) }
    return Self.model(issued, account: account)
  }

  var authorizations: Int { locked { $0.authorizations } }
  var spent: [String] { locked { $0.spent } }
  var reuses: Int { locked { $0.issuer.counters.reuses } }

  var authorizer: any Authorizer {
    ClosureAuthorizer(isInteractive: false) { [self] request in
      if delay > .zero { try await Task.sleep(for: delay) }
      let result: Result<RotatingTokenIssuer.Issued, RotatingTokenIssuer.Refusal> =
        locked { state in
          state.authorizations += 1
          guard let token = request.replacing?.refreshToken else {
            return .success(state.issuer.startFamily(at: Date(), lifetime: .seconds(3600)))
          }
          state.spent.append(token)
          return state.issuer.rotate(token, at: Date(), lifetime: .seconds(3600))
        }
      switch result {
      case .success(let issued): return Self.model(issued, account: request.key.account)
      case .failure(let refusal): throw InvalidGrant(refusal: refusal)
      }
    }
  }

  private func locked<T>(_ body: (inout State) -> T) -> T {
    lock.lock()
    defer { lock.unlock() }
    return body(&state)
  }

  private static func model(_ issued: RotatingTokenIssuer.Issued, account: String) -> AuthModel {
    AuthModel(
      accessToken: issued.accessToken, account: account, expiresAt: issued.expiresAt,
      refreshToken: issued.refreshToken)
  }
}
