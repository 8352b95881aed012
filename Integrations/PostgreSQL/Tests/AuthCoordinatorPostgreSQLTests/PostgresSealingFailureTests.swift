import AuthCoordinator
import Foundation
import Synchronization
import Testing

@testable import AuthCoordinatorPostgreSQL

/// A sealed row that cannot be opened right now (the integrator's key service is down) is a
/// store failure, thrown; only a row that can never be opened (`open` throws `corrupt_row`, or
/// the plaintext is no model) reads as empty.
@Suite("PostgreSQL sealing failures", .enabled(if: TestServer.isAvailable), .timeLimit(.minutes(1)))
struct PostgresSealingFailureTests {
  /// A TEST-ONLY sealing whose key service can be taken down: `open` then throws an error of
  /// its own, as a client of a key service that does not answer would.
  final class FlakySealing: ModelSealing {
    struct KeyServiceDown: Error {}

    let down = Mutex(false)

    func seal(_ plaintext: Data, for key: AccountKey) throws -> Data {
      Data(plaintext.map { $0 ^ 0x5A })
    }

    func open(_ sealed: Data, for key: AccountKey) throws -> Data {
      if down.withLock({ $0 }) { throw KeyServiceDown() }
      return Data(sealed.map { $0 ^ 0x5A })
    }
  }

  static func model(account: String) -> AuthModel {
    AuthModel(
      uid: "2088-\(account)", accessToken: "AT-stored", mcUid: account,
      expiresAt: Date().addingTimeInterval(3600), refreshToken: "RT-stored")
  }

  @Test(
    "an open that fails for the moment fails the read with unsealing_failed, and the grant carries no read"
  )
  func transientOpenFailure() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let sealing = FlakySealing()
    let issues = IssueLog()
    let store = PostgresTokenStore(
      database: database, sealing: sealing, onIssue: { issues.append($0) })
    let key = AccountKey(account: "alice")
    let stored = Self.model(account: "alice")
    try await store.save(stored, for: key)
    sealing.down.withLock { $0 = true }

    let error = await #expect(throws: PostgresError.self) { try await store.model(for: key) }
    #expect(error?.code == .unsealingFailed)
    #expect(error?.isTransient == true)
    let description = error.map { "\($0)" } ?? ""
    #expect(!description.contains("AT-stored") && !description.contains("RT-stored"))
    // The grant's re-read is left to the coordinator, which then gets the same error.
    let lease = PostgresAuthorizationLease(database: database, readingFrom: store)
    guard
      case .acquired(let grant) = try await lease.acquire(key, owner: "A", timeToLive: .seconds(30))
    else {
      Issue.record("refused")
      return
    }
    #expect(grant.storeRead == .notRead)
    try await lease.release(grant)
    // Not a corrupt row: nothing to report, and the row is read again once the service is back.
    #expect(issues.codes.isEmpty)
    sealing.down.withLock { $0 = false }
    #expect(try await store.model(for: key) == stored)
  }

  @Test(
    "a coordinator is told of the failed read (a storeFailed event), never given a silent empty read"
  )
  func coordinatorSeesAStoreFailure() async throws {
    let database = try await TestServer.database()
    defer { database.close() }
    let sealing = FlakySealing()
    let store = PostgresTokenStore(database: database, sealing: sealing)
    let key = AccountKey(account: "bob")
    try await store.save(Self.model(account: "bob"), for: key)
    sealing.down.withLock { $0 = true }
    let coordinator = AuthCoordinator(
      store: store, lease: PostgresAuthorizationLease(database: database, readingFrom: store),
      authorizer: ClosureAuthorizer(isInteractive: false) { request in
        AuthModel(
          uid: "2088-bob", accessToken: "AT-new", mcUid: request.key.account,
          expiresAt: Date().addingTimeInterval(3600))
      },
      configuration: AuthCoordinator.Configuration(authorizationTimeout: .seconds(5)))
    let events = coordinator.events
    // What the coordinator does with a store it cannot read is its own rule (Semantics, rule
    // 10); the store's part is to say so.
    _ = try? await coordinator.authModel(for: key)
    let failure = await first(of: events, within: .seconds(5)) { event in
      if case .storeFailed(let failed, .load, _) = event { return failed == key }
      return false
    }
    guard case .storeFailed(_, _, let message) = failure else {
      Issue.record("no storeFailed event for the load")
      return
    }
    #expect(message.contains("unsealing_failed"))
    #expect(!message.contains("AT-stored") && !message.contains("RT-stored"))
  }
}
