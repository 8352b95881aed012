import Foundation

/// PLACEHOLDER API shape (being implemented): the coordinator actor.
public actor AuthCoordinator {
  public init(
    store: any TokenStore = InMemoryTokenStore(),
    authorizer: any Authorizer,
    configuration: Configuration = Configuration(),
    onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)? = nil
  ) {}

  public nonisolated(nonsending) func authModel(
    for key: AccountKey,
    refresh: RefreshPolicy = .ifNeeded,
    timeout: Duration? = nil
  ) async throws -> AuthModel {
    fatalError("not yet")
  }

  public func accountStatusChanged(_ change: AccountStatusChange) async {}

  public nonisolated var events: AsyncStream<AuthEvent> { AsyncStream { $0.finish() } }

  public nonisolated var statistics: Statistics { Statistics() }
}
