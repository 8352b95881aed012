import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import RotatingTokenServer
import Testing

/// Revocation on sign-out (issue 37, part 4): the coordinator hands the model it cleared to the
/// authorizer after the sign-out took effect, once, bounded; the OAuth 2 authorizer revokes its
/// refresh token at the loopback server's RFC 7009 endpoint; an event reports the outcome.
@Suite(.timeLimit(.minutes(1))) struct RevocationTests {
  static let secret = "s3:cr&t"

  /// A coordinator on a manual clock whose authorizer revokes at `server`'s `/revoke` (or
  /// nowhere).
  static func coordinator(
    _ server: RotatingTokenServer, revokes: Bool = true, clock: ManualClock = ManualClock(),
    store: InMemoryTokenStore = InMemoryTokenStore()
  ) -> AuthCoordinator {
    var oauth = OAuth2Authorizer(
      tokenEndpoint: server.url("/token"),
      revocationEndpoint: revokes ? server.url("/revoke") : nil,
      clientAuthentication: .clientSecretBasic(id: "reports", secret: secret),
      timeout: .seconds(30))
    oauth.silentRefresh = nil  // no refresh-ahead timer on the clock
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = clock
    configuration.revocationTimeout = .seconds(5)
    return AuthCoordinator(store: store, authorizer: oauth, configuration: configuration)
  }

  static func isRevocation(_ event: AuthEvent) -> Bool {
    if case .signOutRevocation = event { return true }
    return false
  }

  @Test func aLogoutRevokesTheRefreshTokenAfterTheSignOutTookEffect() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["client_id": "reports", "client_secret": Self.secret])
    let coordinator = Self.coordinator(server)
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    await coordinator.invalidate(account: serviceKey.account)
    let event = try await recorder.first(where: Self.isRevocation)
    #expect(event == .signOutRevocation(key: serviceKey, outcome: .revoked))
    let stats = try await server.stats()
    #expect(
      stats.revocations == [
        .init(
          token: try #require(model.refreshToken), hint: "refresh_token",
          authentication: "basic", status: 200)
      ])
    // The server revoked the family: its access token no longer works.
    #expect(try await server.isActive(model.accessToken) == false)
    // The sign-out was announced before the revocation was reported.
    let events = recorder.events
    let signedOut = try #require(
      events.firstIndex(of: .accountStatusChanged(.logout(account: serviceKey.account))))
    let revoked = try #require(events.firstIndex(where: Self.isRevocation))
    #expect(signedOut < revoked)
  }

  @Test func aRevocationThatNeverAnswersHoldsNothingBack() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["revoke_delay": "55"])  // never answers within the test
    let clock = ManualClock()
    let coordinator = Self.coordinator(server, clock: clock)
    let recorder = EventRecorder(coordinator)
    let old = try await coordinator.authModel(for: serviceKey)
    let sleepers = clock.sleeperCount
    await coordinator.invalidate(account: serviceKey.account)
    // The revocation is waited for on the clock, in the background...
    await clock.waitForSleepers(sleepers + 1)
    // ...and a caller after the logout never gets the old model.
    let next = try await coordinator.authModel(for: serviceKey)
    #expect(next.accessToken != old.accessToken)
    #expect(next.refreshToken != old.refreshToken)
    #expect(!recorder.events.contains(where: Self.isRevocation))
    // The bound passes: the revocation is given up and reported.
    clock.advance(by: .seconds(5))
    let event = try await recorder.first(where: Self.isRevocation)
    guard case .signOutRevocation(serviceKey, .failed(let code, _)) = event else {
      Issue.record("expected a failed revocation, got \(event)")
      return
    }
    #expect(code == .timedOut)
    #expect(try await server.stats().revocations.map(\.token) == [old.refreshToken])
  }

  @Test func aFailedRevocationIsReportedWithItsCodeAndNoToken() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(["revoke_status": "503"])
    let coordinator = Self.coordinator(server)
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    await coordinator.invalidate(account: serviceKey.account)
    let event = try await recorder.first(where: Self.isRevocation)
    guard case .signOutRevocation(serviceKey, .failed(let code, let message)) = event else {
      Issue.record("expected a failed revocation, got \(event)")
      return
    }
    #expect(code == .revocationEndpointError)
    #expect(message.contains("HTTP 503"))
    #expect(!message.contains(try #require(model.refreshToken)))
    // Not retried, and the family is still live (nothing was revoked).
    #expect(try await server.stats().revocations.count == 1)
    #expect(try await server.isActive(model.accessToken))
  }

  @Test func withoutAnEndpointNothingIsRevoked() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    let coordinator = Self.coordinator(server, revokes: false)
    let recorder = EventRecorder(coordinator)
    let model = try await coordinator.authModel(for: serviceKey)
    await coordinator.invalidate(account: serviceKey.account)
    _ = try await coordinator.authModel(for: serviceKey)
    #expect(try await server.stats().revocations.isEmpty)
    #expect(!recorder.events.contains(where: Self.isRevocation))
    #expect(try await server.isActive(model.accessToken))
  }

  @Test func aTokenIsRevokedOnceAndTheStoresModelToo() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    // A model only the store holds (this process never read it).
    let (_, reply) = try await server.token(["grant_type": "client_credentials"])
    let stored = try #require(reply["refresh_token"] as? String)
    let store = InMemoryTokenStore()
    await store.save(
      AuthModel(
        uid: "", accessToken: reply["access_token"] as? String ?? "", mcUid: serviceKey.account,
        expiresAt: Date().addingTimeInterval(3600), refreshToken: stored), for: serviceKey)
    let coordinator = Self.coordinator(server, store: store)
    let recorder = EventRecorder(coordinator)
    await coordinator.invalidate(account: serviceKey.account)
    try await recorder.first(where: Self.isRevocation)
    // A second logout finds nothing left to revoke.
    await coordinator.invalidate(account: serviceKey.account)
    let model = try await coordinator.authModel(for: serviceKey)
    let events = coordinator.events  // subscribed now: only what follows
    await coordinator.invalidate(account: serviceKey.account)
    for await event in events where Self.isRevocation(event) { break }
    let revocations = try await server.stats().revocations
    #expect(revocations.map(\.token) == [stored, model.refreshToken])
    #expect(revocations.map(\.status) == [200, 200])
  }
}
