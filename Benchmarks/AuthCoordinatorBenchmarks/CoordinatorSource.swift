import AuthCoordinator
import Foundation

/// The module under test behind the harness's `TokenSource` shape.
///
/// Every call goes straight to `AuthCoordinator.authModel(for:refresh:)`, which is
/// `nonisolated(nonsending)`: the adapter adds one protocol-witness call, as for the baselines.
struct CoordinatorSource: TokenSource {
  let impl = Impl.coordinator
  let coordinator: AuthCoordinator

  init(
    seed: [AccountKey: AuthModel], fixture: AuthorizerFixture,
    now: @escaping @Sendable () -> Date
  ) {
    var configuration = AuthCoordinator.Configuration()
    configuration.now = now
    // As a service runs it: every cached model has a refresh-ahead point, which each hit
    // compares with the time (the hit path must not get slower for it).
    configuration.silentRefresh = .recommended
    coordinator = AuthCoordinator(
      store: InMemoryTokenStore(seed),
      authorizer: ClosureAuthorizer { request in try await fixture.authorize(request.key) },
      configuration: configuration
    )
  }

  var parked: Int { coordinator.statistics.waitingCallers }

  var reportedAuthorizations: Int? { coordinator.statistics.authorizationsStarted }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    try await coordinator.authModel(for: key)
  }

  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel {
    try await coordinator.authModel(for: key, refresh: .force(rejecting: token))
  }
}
