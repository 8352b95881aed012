import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

// SIMULATED SERVER, REAL PRODUCTS, VIRTUAL TIME: the real coordinator and OAuth2Authorizer over
// the TestKit's in-process token server, on a ManualClock.
/// Seams issue, break 11: after one `invalid_grant` every later call sent the dead refresh token
/// again (96-97 token requests in 10 s against a real server; 5 in 11 s without the fallback).
@Suite(.timeLimit(.minutes(1))) struct RefusedRefreshTokenTests {
  static let endpoint = URL(string: "https://auth.example.test/oauth/token")!

  @Test(arguments: [false, true])
  func aRefusedRefreshTokenIsNeverSentAgain(fallbackOnInvalidGrant: Bool) async throws {
    let clock = ManualClock()
    let server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.endpoint, clientID: "reports",
      fallbackOnInvalidGrant: fallbackOnInvalidGrant, transport: server, now: clock.dateSource)
    let key = AccountKey(account: "reports")
    let store = InMemoryTokenStore()
    // A model whose refresh token the server no longer knows (revoked, or spent elsewhere).
    await store.save(
      AuthModel(
        uid: "reports", accessToken: "expired-access", mcUid: "reports",
        expiresAt: clock.date.addingTimeInterval(-60), refreshToken: "dead-refresh"), for: key)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configuration.random = { 0.5 }
    let coordinator = AuthCoordinator(
      store: store, authorizer: authorizer, configuration: configuration)

    if fallbackOnInvalidGrant {
      // Refused, then a new family from the primary grant at once.
      let model = try await coordinator.authModel(for: key)
      #expect(model.refreshToken != "dead-refresh")
    } else {
      let error = await #expect(throws: AuthCoordinatorError.self) {
        try await coordinator.authModel(for: key)
      }
      #expect(error?.code == .invalidGrant)
      #expect(error?.refusesRefreshToken == true)
      // Past the cooldown, the next call authorizes without it (client credentials here).
      clock.advance(by: .seconds(10))
      let model = try await coordinator.authModel(for: key)
      #expect(model.accessToken != "expired-access")
    }
    #expect(server.counters.invalidGrants == 1, "the dead refresh token was sent once")
    #expect(server.counters.clientCredentialsGrants == 1)
    #expect(server.counters.tokenRequests == 2)
  }
}

// Fleet simulation, seed 0x670 (its check that no token request leaves while the key backs
// off): a refresh refused with `invalid_grant` came back after the flight's grant lapsed (the
// process was paused), another process took the lease, failed and recorded a back-off; the
// fallback's login left at once, past the coordinator's guard, which ran before the first
// request only. The fallback now asks the guard again (`confirmAnotherTokenRequest()`).
extension RefusedRefreshTokenTests {
  @Test func theFallbackAfterARefusedRefreshPassesTheLeaseGuardAgain() async throws {
    let rig = await LeaseRig { server, lease in
      // The refresh's answer arrives after another process took the lease over.
      TakeOverTransport(server: server, lease: lease)
    }
    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await rig.coordinator.authModel(for: rig.key)
    }
    #expect(error?.code == .leaseLost, "\(String(describing: error))")
    #expect(error?.refusesRefreshToken == true, "the dead refresh token is never sent again")
    #expect(
      rig.server.counters.tokenRequests == 1,
      "before the fix: the fallback's login left without the grant (2 token requests)")
    #expect(rig.server.counters.clientCredentialsGrants == 0)
  }

  // Named in the last stop's closing note: the guard renewed the grant and measured what was
  // left of it, but a lease's renewal ignores sign-outs, so a logout elsewhere during the
  // refused refresh let the fallback's login leave for a signed-out user (its result was then
  // refused by the save's check, an orphan token family at the server). The guard now asks
  // whether the grant is still current too. The announcement never reaches this process here,
  // so only the guard can see the sign-out.
  @Test func aLogoutDuringTheRefusedRefreshStopsTheFallback() async throws {
    let rig = await LeaseRig { server, lease in
      lease.hidesChanges = true
      return LogoutTransport(server: server, lease: lease, account: "reports")
    }
    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await rig.coordinator.authModel(for: rig.key)
    }
    #expect(error?.code == .signedOut, "\(String(describing: error))")
    #expect(
      rig.server.counters.tokenRequests == 1,
      "before the fix: the fallback's login left for the signed-out user (2 token requests)")
    #expect(rig.server.counters.clientCredentialsGrants == 0)
  }

  // Found by the fleet simulation once the guard asked isCurrent (seed 0x17f7): the guard
  // renewed the grant and measured what was left of it, then asked isCurrent, which hung for
  // 29 s; the fallback's request then left on a grant long lapsed, during another process's
  // back-off. The question now comes first, and the renewal and the margin after it.
  @Test func aSlowAnswerToTheGuardsQuestionLeavesNoStaleMargin() async throws {
    let rig = await LeaseRig { server, lease in
      NoTransport(server: server)
    }
    // The first question takes a minute, during which another process takes the lease over.
    rig.lease.onCheck = { [clock = rig.clock, lease = rig.lease, key = rig.key] in
      clock.advance(by: .seconds(60))
      _ = await lease.inner.acquire(key, owner: "another process", timeToLive: .seconds(15))
    }
    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await rig.coordinator.authModel(for: rig.key)
    }
    #expect(error?.code == .leaseLost, "\(String(describing: error))")
    #expect(
      rig.server.counters.tokenRequests == 1,
      "before the fix: the fallback's login left on a lapsed grant (2 token requests)")
  }
}

/// The SIMULATED token server, reached directly.
private struct NoTransport: HTTPTransport {
  let server: SimulatedTokenServer

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    try await server.send(request)
  }
}

/// A coordinator under a lease whose stored model carries a refresh token the SIMULATED
/// server no longer knows, with an `OAuth2Authorizer` that falls back to its primary grant on
/// `invalid_grant`, one silent attempt per flight, reaching the server through the transport
/// `makeTransport` builds.
private struct LeaseRig {
  let clock = ManualClock()
  let server: SimulatedTokenServer
  let lease: TakeOverLease
  let key = AccountKey(account: "reports")
  let coordinator: AuthCoordinator

  init(
    makeTransport: (SimulatedTokenServer, TakeOverLease) -> any HTTPTransport
  ) async {
    server = SimulatedTokenServer(
      clock: clock, tokenLifetime: .seconds(3600), date: clock.dateSource)
    lease = TakeOverLease(InMemoryAuthorizationLease(now: clock.dateSource))
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: RefusedRefreshTokenTests.endpoint, clientID: "reports",
      fallbackOnInvalidGrant: true, transport: makeTransport(server, lease),
      now: clock.dateSource)
    let store = InMemoryTokenStore()
    await store.save(
      AuthModel(
        uid: "reports", accessToken: "expired-access", mcUid: "reports",
        expiresAt: clock.date.addingTimeInterval(-60), refreshToken: "dead-refresh"), for: key)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configuration.random = { 0.5 }
    var once = SilentRefreshPolicy.recommended
    once.maxAttempts = 1
    configuration.silentRefresh = once
    coordinator = AuthCoordinator(
      store: store, lease: lease, authorizer: authorizer, configuration: configuration)
  }
}

/// An in-memory lease that a test can make "taken over by another process": from then on no
/// grant of this process renews.
private final class TakeOverLease: AuthorizationLease, @unchecked Sendable {
  let inner: InMemoryAuthorizationLease
  private let lock = NSLock()
  private var taken = false
  private var hiding = false
  private var checkHook: (@Sendable () async -> Void)?

  /// Runs once, before the next `isCurrent` answer (a lease that takes its time).
  var onCheck: (@Sendable () async -> Void)? {
    get { lock.withLock { checkHook } }
    set { lock.withLock { checkHook = newValue } }
  }

  init(_ inner: InMemoryAuthorizationLease) { self.inner = inner }

  /// Whether the lease's change notices never reach the coordinator (a process that has not
  /// heard of another's sign-out yet).
  var hidesChanges: Bool {
    get { lock.withLock { hiding } }
    set { lock.withLock { hiding = newValue } }
  }

  func takeOver() { lock.withLock { taken = true } }
  private var takenOver: Bool { lock.withLock { taken } }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    takenOver ? nil : await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func signOut(account: String, by owner: String) async {
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  /// A takeover ends renewals, not the grant's generation: `isCurrent` answers about
  /// sign-outs only, as a real lease's does.
  func isCurrent(_ grant: LeaseGrant) async -> Bool {
    let hook = lock.withLock { () -> (@Sendable () async -> Void)? in
      defer { checkHook = nil }
      return checkHook
    }
    await hook?()
    return await inner.isCurrent(grant)
  }
  func changes() -> AsyncStream<LeaseChange> {
    hidesChanges ? AsyncStream { _ in } : inner.changes()
  }
}

/// The SIMULATED token server, reached through a transport that has another process log
/// `account` out (revoke its grants, announce) while the first request is on its way.
private struct LogoutTransport: HTTPTransport {
  let server: SimulatedTokenServer
  let lease: TakeOverLease
  let account: String

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    if server.counters.tokenRequests == 0 {
      await lease.inner.revokeGrants(ofAccount: account)
      await lease.inner.signOut(account: account, by: "another process")
    }
    return try await server.send(request)
  }
}

/// The SIMULATED token server, reached through a transport that has the lease taken over while
/// the first request is on its way (the process was paused past its grant).
private struct TakeOverTransport: HTTPTransport {
  let server: SimulatedTokenServer
  let lease: TakeOverLease

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    lease.takeOver()
    return try await server.send(request)
  }
}
