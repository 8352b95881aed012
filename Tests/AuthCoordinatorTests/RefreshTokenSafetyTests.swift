import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Rule 16 (Sources/AuthCoordinator/Documentation.docc/Semantics.md): a refresh token is never lost and never spent twice. Against a
/// simulated token server that rotates refresh tokens and revokes the family on reuse
/// (``TestTokenIssuer``), in one process.
@Suite(.timeLimit(.minutes(2))) struct RefreshTokenSafetyTests {
  /// The report, tried as a new user would: the refresh took longer than the deadline,
  /// the server rotated the token, and the coordinator threw the result away, so the store
  /// kept the spent refresh token and every later refresh failed. Now the late result is stored
  /// (not served to the callers that already failed), and adopted by memory.
  @Test func aRefreshThatOutlivesItsDeadlineIsStoredAndTheNextRefreshUsesItsToken() async throws {
    let rig = await Rig()
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    #expect(call.request.replacing == rig.expired, "the request carries the model it replaces")
    rig.harness.clock.advance(by: .seconds(2))
    await expectFailure(first, .timedOut)
    #expect(!call.isCancelled, "a refresh in progress is not cancelled: its result matters")

    // The server answers late, after rotating the refresh token.
    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    call.succeed(with: rotated)
    try await rig.events.first { if case .lateResultSaved = $0 { true } else { false } }
    #expect(try await rig.harness.store.model(for: u1) == rotated)
    #expect(rig.harness.stats.lateResultsSaved == 1)
    #expect(rig.harness.stats.lateResultsDiscarded == 0)

    // Memory adopted it: served with no new authorization.
    #expect(try await rig.harness.request().value == rotated)
    #expect(rig.harness.authorizer.callCount == 1)

    // The next refresh spends the rotated token, not the spent one.
    let forced = rig.harness.request(refresh: .force(rejecting: rotated.accessToken))
    let next = await rig.harness.authorizer.nextCall()
    #expect(next.request.replacing?.refreshToken == rotated.refreshToken)
    let again = try rig.issuer.refresh(
      next.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    next.succeed(with: again)
    #expect(try await forced.value == again)
    #expect(rig.issuer.reuses == 0)
  }

  /// The other order: a new request arrives while the stopped refresh is still running. It
  /// must not spend the same refresh token (the server would revoke the family): it waits for
  /// the stopped refresh, then adopts what it stored.
  @Test func aNewFlightWaitsForAStoppedRefreshAndAdoptsItsResult() async throws {
    let rig = await Rig()
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    rig.harness.clock.advance(by: .seconds(2))
    await expectFailure(first, .timedOut)

    let second = rig.harness.request()
    try await rig.harness.waitForWaiters(1)
    #expect(rig.harness.authorizer.callCount == 1, "no second refresh while the first runs")

    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    call.succeed(with: rotated)
    #expect(try await second.value == rotated)
    #expect(rig.harness.authorizer.callCount == 1)
    #expect(rig.harness.stats.adoptedFromStore == 1)
    #expect(rig.issuer.reuses == 0)
  }

  /// A logout between the deadline and the late result: the result stays discarded.
  @Test func aLateRefreshResultAfterALogoutIsDiscarded() async throws {
    let rig = await Rig()
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    rig.harness.clock.advance(by: .seconds(2))
    await expectFailure(first, .timedOut)
    await rig.harness.coordinator.accountStatusChanged(.logout(account: "u1"))

    call.succeed(with: makeModel("late", clock: rig.harness.clock, expiresIn: 3600))
    try await rig.events.first { if case .lateResultDiscarded = $0 { true } else { false } }
    #expect(try await rig.harness.store.model(for: u1) == nil)
    #expect(rig.harness.stats.lateResultsSaved == 0)

    let next = rig.harness.request()
    let fresh = await rig.harness.authorizer.nextCall()
    #expect(fresh.request.replacing == nil, "nothing of the signed-out user is refreshed")
    fresh.succeed(with: makeModel("new-login", clock: rig.harness.clock, expiresIn: 3600))
    #expect(try await next.value.accessToken == "new-login")
  }

  /// A late result of a flight that did not spend a refresh token is discarded, as before
  /// (rule 8): an interactive authorization that ran out of time is cancelled.
  @Test func aStoppedAuthorizationWithoutARefreshTokenIsStillCancelled() async throws {
    let harness = Harness { $0.authorizationTimeout = .seconds(2) }
    let events = EventRecorder(harness.coordinator)
    let first = harness.request()
    let call = await harness.authorizer.nextCall()
    harness.clock.advance(by: .seconds(2))
    await expectFailure(first, .timedOut)
    await call.waitUntilCancelled()
    try await events.first { if case .lateResultDiscarded = $0 { true } else { false } }
    #expect(harness.stats.lateResultsSaved == 0)
  }

  /// A store holding an expired model with a refresh token, a coordinator with a 2 s
  /// authorization deadline, and the token server that issued the model.
  struct Rig {
    let harness: Harness
    let issuer = TestTokenIssuer()
    let expired: AuthModel
    let events: EventRecorder

    init() async {
      let store = InMemoryTokenStore()
      harness = Harness(store: store) { $0.authorizationTimeout = .seconds(2) }
      expired = issuer.login(
        mcUid: "u1", at: harness.clock.date.addingTimeInterval(-7200))
      await store.save(expired, for: u1)
      events = EventRecorder(harness.coordinator)
    }
  }
}
