import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing
import TokenStore

/// Rule 1 meets rule 16: a stopped refresh is left to finish while its result may be stored,
/// and the key's next refresh waits for it. Once its result can no longer be stored (the user
/// signed out, or the maximum hold abandoned it), nothing waits for it any more, so it is
/// cancelled first: no new authorization of the key starts beside it. The randomized stress
/// saw one such overlap (seed 0x94c515872f3675d3); these reproduce the two ways to it.
@Suite(.timeLimit(.minutes(1))) struct StoppedRefreshCancellationTests {
  /// A refresh of `u1`'s expired model, stopped by its authorization deadline and left to
  /// finish (rule 16), its authorizer call still running.
  func stoppedRefresh(_ harness: Harness) async throws -> ScriptedAuthorizer.Call {
    let issuer = TestTokenIssuer()
    try await harness.store.save(
      issuer.login(mcUid: "u1", at: harness.clock.date.addingTimeInterval(-7200)), for: u1)
    let first = harness.request()
    let refresh = await harness.authorizer.nextCall()
    #expect(refresh.request.replacing?.refreshToken != nil, "a refresh")
    harness.clock.advance(by: .seconds(1))
    await expectFailure(first, .timedOut)
    #expect(!refresh.isCancelled, "a refresh in progress is left to finish (rule 16)")
    return refresh
  }

  /// Before the fix, the logout marked the stopped refresh's result as not to be stored but
  /// left it running, and the next login's authorization started beside it.
  @Test func aLogoutCancelsAStoppedRefreshBeforeTheNextAuthorizationStarts() async throws {
    let harness = Harness {
      $0.authorizationTimeout = .seconds(1)
      $0.maximumHold = .seconds(60)
    }
    let refresh = try await stoppedRefresh(harness)
    await harness.coordinator.accountStatusChanged(.logout(account: "u1"))
    let login = harness.request()
    let next = await harness.authorizer.nextCall()
    #expect(next.request.replacing == nil, "a new session after the logout")
    #expect(
      refresh.isCancelled,
      "before the fix: the signed-out session's refresh ran beside the new authorization")
    let model = makeModel("at-2", clock: harness.clock, expiresIn: 3600)
    next.succeed(with: model)
    #expect(try await login.value == model)
    #expect(try await harness.store.model(for: u1) == model)
  }

  /// Before the fix, the maximum hold stopped the next flight waiting for the stopped refresh
  /// but left the refresh running: the next refresh started beside it.
  @Test func anAbandonedRefreshIsCancelledBeforeTheNextAuthorizationStarts() async throws {
    let harness = Harness {
      $0.authorizationTimeout = .seconds(1)
      $0.maximumHold = .seconds(2)
    }
    let refresh = try await stoppedRefresh(harness)
    harness.clock.advance(by: .milliseconds(500))
    let second = harness.request()
    try await harness.waitForWaiters(1)
    #expect(harness.authorizer.callCount == 1, "it waits for the stopped refresh, at first")
    // The maximum hold, 2 s after the refresh began, before the caller's own deadline.
    harness.clock.advance(by: .milliseconds(500))
    let next = await harness.authorizer.nextCall()
    #expect(
      refresh.isCancelled,
      "before the fix: the abandoned refresh ran beside the next authorization")
    let model = makeModel("at-2", clock: harness.clock, expiresIn: 3600)
    next.succeed(with: model)
    #expect(try await second.value == model)
  }
}
