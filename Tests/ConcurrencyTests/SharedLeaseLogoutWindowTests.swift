import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

extension ConcurrencySuites {
  /// Found by the real-clock shared-lease stress this package once ran (since replaced by the
  /// deterministic fleet simulation), reproduced here deterministically; this test failed
  /// before the fix.
  ///
  /// A logout used to empty the store, then record the sign-out in the lease (rule 19). A
  /// holder in another process whose result arrived between the two checked `isCurrent` before
  /// its save (true: no sign-out recorded yet), saved, and checked again (still true), so its
  /// save survived the logout, and every process served the signed-out session's model. Now
  /// the logout revokes the lease's earlier grants (silently) before it empties the store, and
  /// announces the sign-out after: the holder's result is never stored.
  @Suite struct SharedLeaseLogoutWindowTests {
    @Test(.timeLimit(.minutes(1)))
    func aResultArrivingBetweenAnotherProcesssRemovalAndItsAnnouncementIsNeverStored()
      async throws
    {
      let key = AccountKey(account: "u1")
      let store = InMemoryTokenStore()
      let lease = InMemoryAuthorizationLease()
      // SIMULATED token server: the TestKit's shared rotation rules.
      let issuer = LockedState(RotatingTokenIssuer())
      await store.save(Self.login(issuer, lifetime: .seconds(-1)), for: key)
      let configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(60))
      let appAuthorizer = ScriptedAuthorizer()
      let app = AuthCoordinator(
        store: store, lease: lease, authorizer: appAuthorizer, configuration: configuration)
      let gate = Gate(closed: true)
      let widget = AuthCoordinator(
        store: store, lease: SlowSignOutLease(inner: lease, gate: gate),
        authorizer: ClosureAuthorizer { _ in Self.login(issuer, lifetime: .seconds(3600)) },
        configuration: configuration)

      // The app refreshes the expired session; the token server rotates the refresh token.
      let refreshing = Task { try await app.authModel(for: key) }
      let call = await appAuthorizer.nextCall()
      let spent = try #require(call.request.replacing?.refreshToken)
      let rotation = issuer.withLock { $0.rotate(spent, at: Date(), lifetime: .seconds(3600)) }
      let rotated = Self.model(try rotation.get())

      // The widget logs the user out: it empties the store, then announces the sign-out in the
      // lease, which takes a moment (a file lease takes a lock and writes a file).
      let logout = Task { await widget.accountStatusChanged(.logout(account: "u1")) }
      try await gate.waitUntilHeld()
      #expect(await store.model(for: key) == nil, "the logout emptied the store first")

      // The app's answer arrives in that moment: its grant was revoked, so it stores nothing,
      // and its callers learn the user signed out.
      call.succeed(with: rotated)
      do {
        let model = try await refreshing.value
        Issue.record("the app served \(model) after another process's logout emptied the store")
      } catch let error as AuthCoordinatorError {
        #expect(error.code == .signedOut)
      }
      #expect(await store.model(for: key) == nil)

      // The sign-out is announced; the logout returns; nothing of the old session is served.
      gate.open()
      await logout.value
      #expect(await store.model(for: key) == nil)
      let served = try await widget.authModel(for: key)
      #expect(served != rotated)
      #expect(issuer.withLock { $0.counters.reuses } == 0)
    }

    static func login(_ issuer: LockedState<RotatingTokenIssuer>, lifetime: Duration) -> AuthModel {
      model(issuer.withLock { $0.startFamily(at: Date(), lifetime: lifetime) })
    }

    static func model(_ issued: RotatingTokenIssuer.Issued) -> AuthModel {
      AuthModel(
        uid: "2088000000000001", accessToken: issued.accessToken, mcUid: "u1",
        expiresAt: issued.expiresAt, refreshToken: issued.refreshToken)
    }
  }
}

/// A lease whose sign-out passes a ``Gate`` before it is recorded.
private struct SlowSignOutLease: AuthorizationLease {
  let inner: InMemoryAuthorizationLease
  let gate: Gate

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await inner.acquire(key, owner: owner, timeToLive: timeToLive)
  }
  func renew(_ grant: LeaseGrant, timeToLive: Duration) async -> LeaseGrant? {
    await inner.renew(grant, timeToLive: timeToLive)
  }
  func release(_ grant: LeaseGrant) async { await inner.release(grant) }
  func signOut(account: String, by owner: String) async {
    await gate.pass()
    await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async { await inner.signOutAll(by: owner) }
  func revokeGrants(ofAccount account: String) async {
    await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async { await inner.revokeAllGrants() }
  func isCurrent(_ grant: LeaseGrant) async -> Bool { await inner.isCurrent(grant) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
