import AuthCoordinator
import AuthCoordinatorTestKit
import Testing

@Suite(.timeLimit(.minutes(2))) struct SmokeTests {
  @Test func coldMissAuthorizesOnceThenHits() async throws {
    let h = Harness()
    let first = h.request()
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(with: makeModel("t1", clock: h.clock, expiresIn: 3600))
    #expect(try await first.value.accessToken == "t1")
    #expect(try await h.coordinator.authModel(for: u1).accessToken == "t1")
    #expect(h.authorizer.callCount == 1)
    #expect(h.stats.cacheHits == 1)
  }
}
