import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The TestKit's SIMULATED token server answers revocations (RFC 7009) as the python loopback
/// server does, so a virtual-time scenario (`authcoord simulate --service`) can sign out and
/// revoke: the real `OAuth2Authorizer` revokes the family after the coordinator's sign-out.
@Suite(.timeLimit(.minutes(1))) struct SimulatedRevocationTests {
  /// The simulated server, an authorizer that revokes at it, and a coordinator on a manual
  /// clock.
  static func rig() -> (SimulatedTokenServer, OAuth2Authorizer, AuthCoordinator) {
    let clock = ManualClock()
    let server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    var oauth = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example/token")!,
      revocationEndpoint: URL(string: "https://auth.example/revoke")!,
      clientAuthentication: .clientSecretBasic(id: serviceKey.account, secret: "s"),
      transport: server, now: clock.dateSource)
    oauth.silentRefresh = nil
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = clock
    configuration.now = clock.dateSource
    let coordinator = AuthCoordinator(authorizer: oauth, configuration: configuration)
    return (server, oauth, coordinator)
  }

  @Test func aSignOutRevokesTheFamilyAtTheSimulatedServer() async throws {
    let (server, oauth, coordinator) = Self.rig()
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    #expect(server.status(of: model.accessToken) == .active)
    await coordinator.invalidate(account: serviceKey.account)
    let event = try await recorder.first {
      if case .signOutRevocation = $0 { return true }
      return false
    }
    #expect(event == .signOutRevocation(key: serviceKey, outcome: .revoked))
    #expect(server.counters.revocations == 1)
    #expect(server.status(of: model.accessToken) == .revoked, "the family is revoked")
    // A revoked family's refresh token is refused (a copy of it is worthless): the authorizer
    // falls back to a client-credentials grant, a new family.
    let fresh = try await oauth.authorize(
      AuthorizationRequest(key: serviceKey, reason: .expired, requestID: "r", replacing: model))
    #expect(server.counters.invalidGrants == 1)
    #expect(server.counters.refreshTokenGrants == 0)
    #expect(server.counters.clientCredentialsGrants == 2)
    #expect(server.status(of: fresh.accessToken) == .active)
  }

  @Test func aRevocationDuringAnOutageIsReportedAsFailed() async throws {
    let (server, _, coordinator) = Self.rig()
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    server.outage = SimulatedTokenServer.Outage(status: 503)
    await coordinator.invalidate(account: serviceKey.account)
    let event = try await recorder.first {
      if case .signOutRevocation = $0 { return true }
      return false
    }
    guard case .signOutRevocation(_, .failed) = event else {
      Issue.record("a failed revocation reported as \(event)")
      return
    }
    #expect(server.counters.revocations == 0)
    #expect(server.status(of: model.accessToken) == .active)
  }
}
