import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

// SIMULATED SERVER, REAL PRODUCTS, VIRTUAL TIME: the real coordinator and OAuth2Authorizer over
// the TestKit's in-process token server, on a ManualClock.
/// Seams issue, break 11: after one `invalid_grant` every later call sent the dead refresh token
/// again (96-97 token requests in 10 s against a real server; 5 in 11 s without the fallback).
@Suite(.timeLimit(.minutes(1))) struct RefusedRefreshTokenTests {
  static let endpoint = URL(string: "https://auth.example.test/oauth/token")!

  @Test(arguments: [false, true])
  func aRefusedRefreshTokenIsNeverSentAgain(fallbackOnInvalidGrant: Bool) async throws {
    let clock = ManualClock()
    let server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports",
      fallbackOnInvalidGrant: fallbackOnInvalidGrant, transport: server, now: clock.dateSource)
    let key = AccountKey(account: "reports")
    let store = InMemoryTokenStore()
    // A model whose refresh token the server no longer knows (revoked, or spent elsewhere).
    await store.save(
      AuthModel(
        uid: "reports", accessToken: "expired-access", mcUid: "reports",
        expiresAt: clock.date.addingTimeInterval(-60), refreshToken: "dead-refresh"), for: key)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configuration.random = { 0.5 }
    let coordinator = AuthCoordinator(
      store: store, authorizer: authorizer, configuration: configuration)

    if fallbackOnInvalidGrant {
      // Refused, then a new family from the primary grant at once.
      let model = try await coordinator.authModel(for: key)
      #expect(model.refreshToken != "dead-refresh")
    } else {
      let error = await #expect(throws: AuthCoordinatorError.self) {
        try await coordinator.authModel(for: key)
      }
      #expect(error?.code == .invalidGrant)
      #expect(error?.refusesRefreshToken == true)
      // Past the cooldown, the next call authorizes without it (client credentials here).
      clock.advance(by: .seconds(10))
      let model = try await coordinator.authModel(for: key)
      #expect(model.accessToken != "expired-access")
    }
    #expect(server.counters.invalidGrants == 1, "the dead refresh token was sent once")
    #expect(server.counters.clientCredentialsGrants == 1)
    #expect(server.counters.tokenRequests == 2)
  }
}
