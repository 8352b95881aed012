import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Issue 13, item 3: a service names its account, not an Alipay "mcUid"; its user id is
/// optional; and it can forget an account with `invalidate(account:)`.
@Suite(.timeLimit(.minutes(1))) struct ServiceVocabularyTests {
  @Test func anAccountKeyIsTheSameKeyUnderEitherName() {
    var key = AccountKey(account: "billing-client")
    #expect(key == AccountKey(account: "billing-client"))
    #expect(key.account == "billing-client")
    key.account = "other"
    #expect(key.account == "other")
    #expect("\(key)" == "other/platformOnly")
  }

  @Test func aServiceModelHasAnOptionalUserID() throws {
    let expiry = Date(timeIntervalSince1970: 1_900_000_000)
    var model = AuthModel(
      accessToken: "secret-token", account: "billing-client", expiresAt: expiry,
      refreshToken: "secret-refresh")
    #expect(model.account == "billing-client")
    #expect(model.mcUid == "billing-client")
    #expect(model.userID == nil)
    #expect(model.uid == "")
    #expect(!"\(model)".contains("secret"))
    // It survives the store's encoding unchanged.
    let decoded = try JSONDecoder().decode(AuthModel.self, from: JSONEncoder().encode(model))
    #expect(decoded == model)
    #expect(decoded.userID == nil)
    model.userID = "alice"
    #expect(model.uid == "alice")
    #expect(
      model
        == AuthModel(
          uid: "alice", accessToken: "secret-token", mcUid: "billing-client", expiresAt: expiry,
          refreshToken: "secret-refresh"))
    model.userID = nil
    #expect(model.uid.isEmpty)
  }

  @Test func invalidateForgetsTheAccountInMemoryAndInTheStore() async throws {
    let store = InMemoryTokenStore()
    let h = Harness(store: store)
    let key = AccountKey(account: "u1")
    let first = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t1"))
    #expect(try await first.value.accessToken == "t1")
    #expect(await store.model(for: key) != nil)

    // A flight in progress for another mode is stopped; its late result is never served.
    let other = AccountKey(account: "u1", mode: "admin")
    let inFlight = Task { try await h.coordinator.authModel(for: other) }
    let call = await h.authorizer.nextCall()
    await h.coordinator.invalidate(account: "u1")
    await expectFailure(inFlight, .signedOut)
    call.succeed(with: makeModel("late"))
    #expect(await store.model(for: key) == nil)

    let next = h.request()
    await h.authorizer.nextCall().succeed(with: makeModel("t2"))
    #expect(try await next.value.accessToken == "t2", "authorized again from nothing")
    #expect(h.statusChanges.withLock { $0.last } == .logout(account: "u1"))
  }
}
