import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Rule 21 (Sources/AuthCoordinator/Documentation.docc/Semantics.md): a model that was served but not stored is not forgotten. Against
/// a simulated token server that rotates refresh tokens (``TestTokenIssuer``) and a store
/// whose saves fail on demand (``GatedStore``), in one process, on a manual clock.
@Suite(.timeLimit(.minutes(1))) struct UnsavedResultTests {
  /// The faults issue's first reproduction: the refresh to RT1 is served but its save fails;
  /// on main the next refresh re-read the store, followed it back to RT0 and spent it again.
  @Test func aFailedSaveDoesNotMakeTheNextRefreshSpendTheOldToken() async throws {
    let rig = await Rig()
    rig.store.fail(.save)
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    call.succeed(with: rotated)
    #expect(try await first.value == rotated, "a model whose save failed is still served")
    try await rig.events.first { if case .modelUnsaved = $0 { true } else { false } }
    #expect(rig.harness.stats.unsavedModels == 1)

    // An hour later (the store still failing), the model expired: the refresh must spend RT1.
    rig.harness.clock.advance(by: .seconds(3700))
    let second = rig.harness.request()
    let next = await rig.harness.authorizer.nextCall()
    #expect(next.request.replacing?.refreshToken == rotated.refreshToken)
    let again = try rig.issuer.refresh(
      next.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    next.succeed(with: again)
    #expect(try await second.value == again)
    #expect(rig.issuer.reuses == 0)
  }

  /// The save is retried with back-off until it lands; the store then holds the served model.
  @Test func theSaveIsRetriedUntilItLands() async throws {
    let rig = await Rig()
    rig.store.fail(.save)
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    let rotated = try rig.issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.harness.clock.date)
    call.succeed(with: rotated)
    #expect(try await first.value == rotated)
    try await rig.events.first { if case .modelUnsaved = $0 { true } else { false } }

    // The first retry (after the base delay) fails too; the disk then has room again.
    rig.harness.clock.advance(by: .seconds(1))
    try await rig.events.first { if case .saveRetryFailed = $0 { true } else { false } }
    rig.store.fail(.save, false)
    rig.harness.clock.advance(by: .seconds(2))
    try await rig.events.first { if case .unsavedModelSaved = $0 { true } else { false } }
    #expect(try await rig.store.model(for: u1) == rotated)
    #expect(rig.harness.stats.saveRetries == 2)

    // Served from memory, no new authorization, and the next refresh spends RT1.
    #expect(try await rig.harness.request().value == rotated)
    #expect(rig.harness.authorizer.callCount == 1)
  }

  /// A logout removes an unsaved model: the retry stops and never writes it back.
  @Test func aLogoutEndsTheRetryAndNothingIsWrittenBack() async throws {
    let rig = await Rig()
    rig.store.fail(.save)
    let first = rig.harness.request()
    let call = await rig.harness.authorizer.nextCall()
    call.succeed(with: makeModel("at-new", clock: rig.harness.clock, expiresIn: 3600))
    _ = try await first.value
    try await rig.events.first { if case .modelUnsaved = $0 { true } else { false } }

    await rig.harness.coordinator.accountStatusChanged(.logout(account: "u1"))
    rig.store.fail(.save, false)
    rig.harness.clock.advance(by: .seconds(1))
    try await rig.events.first { if case .unsavedModelDropped = $0 { true } else { false } }
    #expect(try await rig.store.model(for: u1) == nil)
  }

  struct Rig {
    let harness: Harness
    let store: GatedStore
    let issuer = TestTokenIssuer()
    let events: EventRecorder

    init() async {
      let store = GatedStore()
      self.store = store
      harness = Harness(store: store) { $0.authorizationTimeout = .seconds(2) }
      let expired = issuer.login(mcUid: "u1", at: harness.clock.date.addingTimeInterval(-7200))
      await store.inner.save(expired, for: u1)
      events = EventRecorder(harness.coordinator)
    }
  }
}
