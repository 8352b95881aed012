import Foundation
import SyncPrimitives

// Logout and unbind: memory forgets at once, the store's removal is ordered with every other
// store operation of the user, and the caller waits for it at most the store timeout.
extension AuthCoordinator {
  /// Signs an account out: cancels its flight (its waiters get
  /// ``AuthCoordinatorError/Code-swift.struct/signedOut``), clears memory and store, and calls
  /// the `onAccountStatusChange` hook.
  ///
  /// When this returns, no request will ever be answered with the old model, including one
  /// whose authorization was still in flight: a late result is discarded. A logout or unbind
  /// removes every mode of the user from the store (``TokenStore/removeModels(forAccount:)``),
  /// including modes this process never used.
  ///
  /// It returns within ``Configuration/storeTimeout`` even when the store is stuck: memory is
  /// cleared before the first suspension, and the removal then goes on in the background
  /// (reported as a `storeFailed` event), ahead of any later load of the user.
  ///
  /// ```swift
  /// await coordinator.accountStatusChanged(.logout(account: currentUser.id))
  /// ```
  ///
  /// - Parameter change: What happened to the host app's account.
  public func accountStatusChanged(_ change: AccountStatusChange) async {
    let change = change.normalized
    // The in-memory effect, and the removal's place in the store order, are complete before
    // the first suspension. The removal covers every mode of the user, in memory or not. It
    // is ordered after every store operation already issued for the user (a save of a flight
    // that just finished) and before any issued later (a load cannot read the old model back
    // while it is pending).
    let turn: StoreTurn
    let operation: AuthEvent.StoreOperation
    var closings: [Closing] = []
    // What the server is told to revoke once the sign-out took effect: nil when the
    // authorizer revokes nothing.
    var revocations: SignOutRevocations? = authorizer.revokesOnSignOut ? .init() : nil
    switch change {
    case .logout(let account), .unbind(let account):
      let stripe = table.stripe(forUser: account)
      stripe.lock.lock()
      let known = signOut(
        in: stripe, where: { $0.account == account }, into: &closings, revocations: &revocations)
      if !known { revocations?.accountUnknownInMemory(account) }
      turn = stripe.storeOperations.reserveUser(account)
      stripe.lock.unlock()
      operation = .remove
    case .logoutAll:
      let done = Latch()
      var after: [Latch] = []
      // Barriers are placed in every stripe in one order: a later logoutAll waits for this
      // one in every stripe, never the other way round in some of them.
      table.barrierLock.lock()
      for stripe in table.stripes {
        stripe.lock.lock()
        signOut(in: stripe, where: { _ in true }, into: &closings, revocations: &revocations)
        after += stripe.storeOperations.reserveBarrier(done: done).after
        stripe.lock.unlock()
      }
      table.barrierLock.unlock()
      turn = StoreTurn(after: after, done: done)
      operation = .removeAll
    }
    for closing in closings { carryOut(closing) }
    // The stripes' epochs retired every thread's copy of the signed-out models; the threads
    // now also drop them at their next hit.
    HitReplicas.purgeEverywhere()
    broadcaster.emit(.accountStatusChanged(change))

    // The removal runs in a task of its own, so that a stuck store delays this call by at most
    // the store deadline; the removal still happens when the store comes back.
    let store = self.store
    let revoker = Revoker(
      authorizer: authorizer, broadcaster: broadcaster, clock: clock,
      limit: configuration.revocationTimeout)
    Task { [weak self] in
      await turn.waitForTurn()
      // Inside the removal's turn, before it: what only the store knows of the signed-out keys.
      var plan = revocations
      for key in plan?.keysToRead ?? [] {
        plan?.read(key, try? await store.model(for: key))
      }
      // Grants taken before now can no longer store a result, before the store is emptied: a
      // holder in another process whose result lands meanwhile sees it (rule 19), and a
      // fenced store refuses its save once the removal marked the revoked fences.
      let revocation = await self?.revokeGrants(change)
      if let self, let revocation {
        await self.removeAndAnnounce(change, after: revocation)
      } else {
        // The coordinator is gone: the user's models still leave the store.
        try? await Self.remove(change, from: store)
      }
      turn.finish()
      // The sign-out has taken effect (memory at once, the store now): only then is the server
      // told, in the background, bounded, and nothing waits for it.
      if let plan { await revoker.revoke(plan) }
    }
    let limit = policy.storeTimeout
    if await !turn.done.wait(until: clock.deadline(after: limit), on: clock) {
      reportStoreFailure(
        nil, operation,
        AuthCoordinatorError(
          .storeFailed,
          "the store did not finish the removal within \(limit); it goes on in the background"))
    }
    await onAccountStatusChange?(change)
  }

  /// Forgets a service's account: the service spelling of
  /// `accountStatusChanged(.logout(account: account))`, with the same guarantees.
  ///
  /// Every mode of the account is removed from memory and the store (its refresh token
  /// included), its flight in progress is stopped (its callers get
  /// ``AuthCoordinatorError/Code-swift.struct/signedOut``), and no result that arrives later is
  /// served or stored. The next request authorizes from nothing. Use it when the account's
  /// credentials are revoked or rotated, or the account is removed.
  ///
  /// A token a resource server rejected is not a reason to forget the account: ask for a
  /// forced refresh that names it, which keeps the refresh token and is shared by every caller
  /// that saw the same rejection (`BearerClient` in `AuthCoordinatorOAuth2` does this on a
  /// 401):
  ///
  /// ```swift
  /// let fresh = try await coordinator.authModel(for: key, refresh: .force(rejecting: rejected))
  /// ```
  ///
  /// - Parameter account: The account or client id (``AccountKey/account``).
  public func invalidate(account: String) async {
    await accountStatusChanged(.logout(account: account))
  }

  /// Signs out the keys of `stripe` that `matches` selects (under the stripe's lock), and adds
  /// the models memory held to `revocations`.
  ///
  /// - Returns: Whether any key matched.
  @discardableResult
  private func signOut(
    in stripe: Stripe, where matches: (AccountKey) -> Bool, into closings: inout [Closing],
    revocations: inout SignOutRevocations?
  ) -> Bool {
    let keys = stripe.accounts.keys.filter(matches)
    for key in keys {
      if let machine = stripe.accounts[key]?.machine {
        revocations?.signedOut(
          key, cached: machine.cachedModel, cacheKnown: machine.cache != .unknown)
      }
      if let ending = stripe.accounts[key]?.machine.signOut() {
        closings.append(close(ending, key: key, in: stripe))
      }
    }
    return !keys.isEmpty
  }

  /// What revokes a sign-out's models: the coordinator's authorizer, events and clock, without
  /// the coordinator (a revocation does not keep it alive).
  struct Revoker: Sendable {
    let authorizer: any Authorizer
    let broadcaster: EventBroadcaster<AuthEvent>
    let clock: CoordinatorClock
    let limit: Duration

    /// Revokes a sign-out's models at the server, one after the other, each bounded by
    /// ``Configuration/revocationTimeout``, and reports each outcome. Runs after the sign-out
    /// took effect; nothing waits for it.
    func revoke(_ plan: SignOutRevocations) async {
      for (key, model) in plan.models {
        let outcome = await revoke(model)
        broadcaster.emit(.signOutRevocation(key: key, outcome: outcome))
      }
    }

    /// Runs `authorizer.revoke(model)` in a task of its own and waits for it at most `limit`:
    /// a revocation that never answers is cancelled and reported as timed out, and holds
    /// nothing.
    private func revoke(_ model: AuthModel) async -> AuthEvent.RevocationOutcome {
      let finished = Latch()
      let outcome = LockedState<AuthEvent.RevocationOutcome?>(nil)
      let task = Task {
        let result: AuthEvent.RevocationOutcome
        do {
          try await authorizer.revoke(model)
          result = .revoked
        } catch let error as AuthCoordinatorError {
          result = .failed(code: error.code, message: error.message)
        } catch {
          // Only the type: an error of the authorizer's own might print a token.
          result = .failed(
            code: .authorizationFailed, message: "the revocation failed (\(type(of: error)))")
        }
        outcome.withLock { $0 = result }
        finished.open()
      }
      guard await finished.wait(until: clock.deadline(after: limit), on: clock) else {
        task.cancel()
        return .failed(code: .timedOut, message: "the revocation did not end within \(limit)")
      }
      return outcome.withLock { $0 } ?? .revoked
    }
  }

  /// The one place that takes a sign-out's models out of the store and then tells the other
  /// processes (which read the store empty when they hear of it): a logout, and a save undone
  /// because a sign-out elsewhere landed during it. A removal that failed, or one after a
  /// revocation that failed, is recorded (``removalFinished(_:failure:revocationFailed:)``):
  /// until a logout of the user succeeds, what a read finds for the user is not served.
  ///
  /// - Parameters:
  ///   - change: The sign-out.
  ///   - revocation: What the revocation of the user's grants before it did. Its fence, when
  ///     the lease told it, is the largest of a grant it revoked: a fenced store then refuses
  ///     the late saves of those grants
  ///     (``FencedTokenStore/removeModels(forAccount:refusingFencesThrough:)``).
  func removeAndAnnounce(_ change: AccountStatusChange, after revocation: Revocation) async {
    var failure: (any Error)?
    do {
      if let fence = revocation.fence, let fenced = store as? any FencedTokenStore {
        try await Self.remove(change, from: fenced, refusingFencesThrough: fence)
      } else {
        try await Self.remove(change, from: store)
      }
    } catch {
      failure = error
    }
    removalFinished(change, failure: failure, revocationFailed: revocation.failed)
    await announceSignOut(change)
  }

  /// Removes what `change` signs out from `store`.
  private static func remove(_ change: AccountStatusChange, from store: any TokenStore)
    async throws
  {
    switch change {
    case .logout(let account), .unbind(let account):
      try await store.removeModels(forAccount: account)
    case .logoutAll: try await store.removeAll()
    }
  }

  /// Removes what `change` signs out from `store`, and marks the grants the sign-out revoked.
  private static func remove(
    _ change: AccountStatusChange, from store: any FencedTokenStore,
    refusingFencesThrough fence: UInt64
  ) async throws {
    switch change {
    case .logout(let account), .unbind(let account):
      try await store.removeModels(forAccount: account, refusingFencesThrough: fence)
    case .logoutAll: try await store.removeAll(refusingFencesThrough: fence)
    }
  }

  /// Undoes a save that a sign-out elsewhere made stale, as a logout would: the user's grants
  /// are revoked first (a process that read the saved model meanwhile, under a grant taken
  /// after the sign-out, must not store its refresh of it after the removal; fleet simulation,
  /// seed 0x1dbe), then the store's models are removed and the sign-out announced.
  func undoSave(of key: AccountKey) async {
    let revocation = await revokeGrants(.logout(account: key.account))
    await removeAndAnnounce(.logout(account: key.account), after: revocation)
  }

  /// What a sign-out's revocation of the lease's grants did.
  struct Revocation {
    /// The largest fence of a grant it revoked, when the lease tells it.
    var fence: UInt64?
    /// The lease threw: grants taken before the sign-out may still be current, so another
    /// process's flight may yet store a result of one (its checks before and after its save
    /// pass).
    var failed = false
  }

  /// Makes the lease's earlier grants of the user (or everyone) not current, silently.
  private func revokeGrants(_ change: AccountStatusChange) async -> Revocation {
    guard let lease else { return Revocation() }
    do {
      switch change {
      case .logout(let account), .unbind(let account):
        return Revocation(fence: try await lease.revokeGrantsReportingFence(ofAccount: account))
      case .logoutAll: return Revocation(fence: try await lease.revokeAllGrantsReportingFence())
      }
    } catch {
      reportStoreFailure(nil, .lease, error)
      return Revocation(failed: true)
    }
  }

  /// Tells the other processes that share the lease.
  private func announceSignOut(_ change: AccountStatusChange) async {
    guard let lease else { return }
    do {
      switch change {
      case .logout(let account), .unbind(let account):
        try await lease.signOut(account: account, by: leaseOwner)
      case .logoutAll:
        try await lease.signOutAll(by: leaseOwner)
      }
    } catch {
      reportStoreFailure(nil, .lease, error)
    }
  }

  /// Records whether a logout took effect in the store: while it did not, whatever a load
  /// finds for the user is not served. It did not when the removal threw, or when the lease's
  /// revocation did (`revocationFailed`): a flight of another process under a grant from
  /// before the logout may then store its result after the removal.
  func removalFinished(
    _ change: AccountStatusChange, failure: (any Error)?, revocationFailed: Bool = false
  ) {
    let succeeded = failure == nil && !revocationFailed
    switch change {
    case .logout(let account), .unbind(let account):
      let stripe = table.stripe(forUser: account)
      stripe.lock.withLock { stripe.unremoved.removal(of: change, succeeded: succeeded) }
      if let failure { reportStoreFailure(nil, .remove, failure, stripe: stripe) }
    case .logoutAll:
      for stripe in table.stripes {
        stripe.lock.withLock { stripe.unremoved.removal(of: change, succeeded: succeeded) }
      }
      if let failure { reportStoreFailure(nil, .removeAll, failure) }
    }
  }
}
