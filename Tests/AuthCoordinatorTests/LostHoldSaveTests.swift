import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Rule 16's "never lost" where a failed save meets a lost hold. The open finding of the
/// shared-lease stress with pauses and failed saves (a store left on a spent refresh token of a
/// live family): a holder whose save failed, and whose renewals then failed until its grant
/// lapsed, dropped the retry of its rotated model. Nobody else had taken the lease, so the only
/// copy of the family's newest refresh token was in memory, and the store kept the spent one:
/// the next holder anywhere would spend it again. With a fenced store, a holder whose hold
/// ended still tries its save, and the fence refuses it if a later holder saved first.
@Suite(.timeLimit(.minutes(1))) struct LostHoldSaveTests {
  /// A fenced in-memory store whose saves fail while `failing` is set.
  final class FailingFencedStore: FencedTokenStore, @unchecked Sendable {
    struct Failure: Error {}
    let inner = InMemoryTokenStore()
    let failing = LockedState(false)

    func model(for key: AccountKey) async throws -> AuthModel? { await inner.model(for: key) }
    func save(_ model: AuthModel, for key: AccountKey) async throws {
      if failing.withLock({ $0 }) { throw Failure() }
      await inner.save(model, for: key)
    }
    func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
      if failing.withLock({ $0 }) { throw Failure() }
      return await inner.save(model, for: key, fence: fence)
    }
    func removeModels(forAccount account: String) async throws {
      await inner.removeModels(forAccount: account)
    }
    func removeAll() async throws { await inner.removeAll() }
  }

  struct Rig {
    let clock = ManualClock()
    let store = FailingFencedStore()
    let lease: InMemoryAuthorizationLease
    let faulty: FaultyLease
    let authorizer = ScriptedAuthorizer()
    let issuer = TestTokenIssuer()
    let callers = CallerTracker()
    let a: AuthCoordinator
    let b: AuthCoordinator
    let events: EventRecorder

    init() async {
      lease = InMemoryAuthorizationLease(now: clock.dateSource)
      faulty = FaultyLease(lease)
      let expired = issuer.login(mcUid: "u1", at: clock.date.addingTimeInterval(-7200))
      await store.inner.save(expired, for: u1)
      let configuration = SharedLeaseTests.Rig.configuration(clock) {
        $0.authorizationTimeout = .seconds(10)
        $0.leaseTimeToLive = .milliseconds(600)
      }
      a = AuthCoordinator(
        store: store, lease: faulty, authorizer: authorizer, configuration: configuration)
      b = AuthCoordinator(
        store: store, lease: lease, authorizer: authorizer, configuration: configuration)
      events = EventRecorder(a)
    }

    /// A refreshes the expired model; its save fails, its callers get the rotated model, and
    /// its renewals then fail until its grant lapses.
    func holderLosesItsHoldWithAnUnsavedModel() async throws -> AuthModel {
      store.failing.withLock { $0 = true }
      let first = callers.task { try await a.authModel(for: u1) }
      let call = await authorizer.nextCall()
      let rotated = try issuer.refresh(
        call.request.replacing?.refreshToken, mcUid: "u1", at: clock.date)
      call.succeed(with: rotated)
      #expect(try await first.value == rotated, "served though unsaved (rule 21)")
      try await events.first { if case .modelUnsaved = $0 { true } else { false } }
      faulty.failRenewals(Int.max)
      clock.advance(by: .milliseconds(700))
      try await events.first { if case .leaseLost = $0 { true } else { false } }
      return rotated
    }
  }

  @Test func aRetryAfterTheHoldWasLostStillStoresTheRotatedToken() async throws {
    let rig = await Rig()
    let rotated = try await rig.holderLosesItsHoldWithAnUnsavedModel()
    rig.store.failing.withLock { $0 = false }
    rig.clock.advance(by: .milliseconds(300))
    try await rig.events.first { if case .unsavedModelSaved = $0 { true } else { false } }
    #expect(
      await rig.store.inner.model(for: u1) == rotated,
      "the store holds the family's newest refresh token, not the spent one")

    // Another process whose model expires refreshes with the newest token: no reuse.
    rig.clock.advance(by: .seconds(7200))
    let next = rig.callers.task { try await rig.b.authModel(for: u1) }
    let call = await rig.authorizer.nextCall()
    #expect(call.request.replacing?.refreshToken == rotated.refreshToken)
    call.succeed(
      with: try rig.issuer.refresh(
        call.request.replacing?.refreshToken, mcUid: "u1", at: rig.clock.date))
    _ = try await next.value
    #expect(rig.issuer.reuses == 0)
  }

  @Test func aRetryAfterALaterHolderSavedIsRefusedByTheFence() async throws {
    let rig = await Rig()
    _ = try await rig.holderLosesItsHoldWithAnUnsavedModel()
    // B takes the lapsed lease and stores a newer model first (a fresh login: B's memory never
    // saw A's rotation).
    let second = rig.callers.task { try await rig.b.authModel(for: u1) }
    let call = await rig.authorizer.nextCall()
    let newer = rig.issuer.login(mcUid: "u1", at: rig.clock.date)
    rig.store.failing.withLock { $0 = false }
    call.succeed(with: newer)
    #expect(try await second.value == newer)

    rig.clock.advance(by: .milliseconds(300))
    try await rig.events.first { if case .unsavedModelDropped = $0 { true } else { false } }
    #expect(await rig.store.inner.model(for: u1) == newer, "A's older model never overwrote it")
  }
}
