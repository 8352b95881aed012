import AuthCoordinator
import Foundation
import Testing

/// The README's example, compiled and run, so the front page cannot rot.
@Suite(.timeLimit(.minutes(1))) struct ReadmeExampleTests {
  /// Stands in for the reader's backend.
  struct Backend: Sendable {
    func alipayModel(for mcUid: String) async throws -> AuthModel {
      AuthModel(
        uid: "2088000000000001", accessToken: UUID().uuidString, mcUid: mcUid,
        expiresAt: Date().addingTimeInterval(3600))
    }
  }

  @Test func theReadmeExampleRuns() async throws {
    let applicationSupport = FileManager.default.temporaryDirectory
      .appendingPathComponent("readme-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: applicationSupport) }
    let myBackend = Backend()
    let currentUser = (id: "u1", name: "reader")

    // --- from README.md ---
    // `applicationSupport`, `myBackend` and `currentUser` are your own.
    let coordinator = AuthCoordinator(
      store: FileTokenStore(url: applicationSupport.appendingPathComponent("alipay-tokens")),
      authorizer: ClosureAuthorizer { request in
        // Your way to a fresh model, e.g. AuthModel(uid:accessToken:mcUid:expiresAt:) from your
        // backend. In an app, AlipayAuthorizer(provider:exchanger:) bounces to Alipay for an auth
        // code and exchanges it at your server (under its own exchangeTimeout).
        try await myBackend.alipayModel(for: request.key.mcUid)
      },
      configuration: .init(authorizationTimeout: .seconds(30)))  // a service's deadline

    let key = AccountKey(mcUid: currentUser.id)
    let model = try await coordinator.authModel(for: key)
    let fresh = try await coordinator.authModel(for: key, extendParams: ["NeedRefreshToken": "YES"])
    await coordinator.accountStatusChanged(.logout(mcUid: currentUser.id))
    // --- end ---

    #expect(model.mcUid == "u1")
    #expect(fresh.accessToken != model.accessToken)
    let reloaded = FileTokenStore(url: applicationSupport.appendingPathComponent("alipay-tokens"))
    #expect(try await reloaded.model(for: key) == nil, "logout cleared the file store")
    #expect(coordinator.statistics.authorizationsStarted == 2)
  }
}
