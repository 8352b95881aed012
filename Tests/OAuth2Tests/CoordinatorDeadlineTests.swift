import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// A service authorizer has one deadline: the coordinator's authorization timeout. It must not
/// switch its flight to the (short) exchange deadline by calling `request.exchange {}`.
@Suite(.timeLimit(.minutes(1))) struct CoordinatorDeadlineTests {
  @Test func aSlowTokenRequestRunsUnderTheAuthorizationDeadlineNotTheExchangeOne() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(delay: 0.4)
    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: .seconds(20), exchangeTimeout: .milliseconds(50))
    configuration.refreshLeeway = .zero
    let coordinator = AuthCoordinator(
      authorizer: authorizer(server), configuration: configuration)
    let model = try await coordinator.authModel(for: serviceKey)
    #expect(!model.accessToken.isEmpty)
  }
}
