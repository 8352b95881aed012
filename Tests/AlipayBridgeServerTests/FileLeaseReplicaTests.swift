import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Issue 36: the integrator's server replicated, each replica with its own `FileTokenStore` and
/// `FileAuthorizationLease` on one shared file pair (as replicas on one host share them), against
/// the SIMULATED gateway on a loopback socket: concurrent app requests at each expiry, split
/// across the replicas, make one refresh at Alipay, and no refresh token is ever spent twice.
@Suite(.timeLimit(.minutes(2))) struct FileLeaseReplicaTests {
  @Test func replicasOnAFileStoreAndLeaseRefreshOnceAtEachExpiryAndNeverReuse() async throws {
    let rig = try Rig()
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("alipay-replicas-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeURL = directory.appendingPathComponent("tokens")
    let replicas = (0..<2).map { _ in
      let store = FileTokenStore(url: storeURL)
      return AlipayTokenService(
        api: rig.api(), scope: "auth_user", store: store,
        lease: FileAuthorizationLease(nextTo: store, now: rig.clock.dateSource),
        configuration: AuthCoordinator.Configuration(
          authorizationTimeout: .seconds(60),
          silentRefresh: SilentRefreshPolicy(refreshAhead: nil), now: rig.clock.dateSource))
    }
    _ = try await replicas[0].signIn(
      authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    for expiry in 1...5 {
      rig.clock.advance(by: .seconds(3601))
      let tokens = try await withThrowingTaskGroup(of: String.self) { group in
        for request in 0..<100 {
          let replica = replicas[request % 2]
          group.addTask { try await replica.refresh(mcUid: "u1").accessToken }
        }
        return try await group.reduce(into: Set<String>()) { $0.insert($1) }
      }
      #expect(tokens.count == 1, "one token for every request of expiry \(expiry)")
      #expect(rig.gateway.counters.refreshGrants == expiry)
      #expect(rig.gateway.status(ofAccessToken: tokens.first!) == .active)
    }
    #expect(rig.gateway.counters.reuses == 0)
    #expect(rig.gateway.counters.errors == 0)
  }
}
