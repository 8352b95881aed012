import Foundation

// Rule 21: a model that was served but not stored stays memory's model for its key, marked
// unsaved, until a retry stores it, a newer model replaces it, or a logout removes it. A re-read
// never moves memory back to an older stored model, so a refresh always spends the newest
// refresh token the process knows.
extension AccountStateMachine {
  /// Whether the flight's task should retry the save of `model` now: memory still holds it,
  /// unsaved. `false` once a newer model replaced it or a logout removed it (the retry stops).
  func needsSave(_ model: AuthModel) -> Bool {
    guard case .model(let cached) = cache else { return false }
    return cached.unsaved && cached.model == model
  }

  /// A retry stored `model` (memory and store agree again), or its save was refused because
  /// another holder of the lease may have stored a newer one (memory follows the store again).
  mutating func unsavedModelSettled(_ model: AuthModel) {
    guard case .model(var cached) = cache, cached.model == model else { return }
    cached.unsaved = false
    cached.obtainedUnder = nil
    cache = .model(cached)
  }

  /// A save of `model` that went on after its callers were served (a retry, or one past its
  /// deadline) found that the user signed out since the model's lease was taken (the save was
  /// not made, or undone): memory forgets the model, as the sign-out's announcement would make
  /// it, and the next request reads the store.
  mutating func modelSignedOut(_ model: AuthModel) {
    guard case .model(let cached) = cache, cached.model == model else { return }
    cache = .unknown
  }

  /// The most refresh tokens ``replacedRefreshTokens`` keeps: more than a chain of refreshes
  /// whose saves all failed reaches while a store is down for a token's lifetime or two.
  static var replacedRefreshTokenLimit: Int { 32 }

  /// Records that the model carrying `token` is being replaced by an authorization: from now
  /// on a stored model that carries it is older than any model this process obtained since.
  mutating func noteReplaced(refreshToken token: String) {
    guard !replacedRefreshTokens.contains(token) else { return }
    replacedRefreshTokens.append(token)
    if replacedRefreshTokens.count > Self.replacedRefreshTokenLimit {
      replacedRefreshTokens.removeFirst()
    }
  }

  /// What a re-read should go on with, given what the store returned: the store is the shared
  /// truth, except that an unsaved model in memory is kept over a stored one that is older,
  /// until it is settled (stored, or refused by the fence because a later holder of the lease
  /// saved) or replaced. The stored model is older when it is empty, or carries no refresh
  /// token, or the refresh token of a model this process's authorizations replaced (spent, or
  /// refused): the save that failed would have replaced it. (An expiry says nothing of which is newer: lifetimes vary
  /// from one grant to the next.)
  ///
  /// A stored model with any other refresh token was stored after
  /// memory's model was obtained, by another process, whose grant came after the hold of the
  /// flight that obtained memory's model lapsed (its check after the write hung, or it paused):
  /// it is newer, and memory follows it; its own model is settled (its retry ends), since
  /// spending its refresh token again would be a reuse (seed 0x8c89).
  ///
  /// A model served at its save's deadline counts as unsaved until that save reports: a read
  /// ordered after a save that failed can come back before the failure is reported, with the
  /// model the save would have replaced (randomized stress with a slow store, seed
  /// 0xa274008b6f676027).
  func preferred(overStored stored: AuthModel?) -> AuthModel? {
    guard case .model(let cached) = cache,
      cached.unsaved || savesPastDeadline.values.contains(cached.model)
    else { return stored }
    if let stored, stored != cached.model, let token = stored.refreshToken,
      !replacedRefreshTokens.contains(token)
    {
      return stored
    }
    return cached.model
  }

  /// The grant memory's model was obtained under, when `model` is memory's model, unsaved
  /// (what ``preferred(overStored:)`` keeps over the store).
  func unsavedGrant(of model: AuthModel?) -> LeaseGrant? {
    guard case .model(let cached) = cache, cached.unsaved, cached.model == model else {
      return nil
    }
    return cached.obtainedUnder
  }

  /// The lease answered the flight's question about the grant memory's unsaved model was
  /// obtained under (``StepKind/checkUnsavedGrant(_:)``). Found by the fleet simulation's
  /// 400,000-seed run (seed 0x47143): a session begun here under a grant taken before a
  /// logout elsewhere, whose save failed, was refreshed by a flight that took the lease after
  /// the logout (its own grant current, the store empty) before the announcement arrived: it
  /// spent the signed-out session's refresh token and stored the result, which every process
  /// then served.
  ///
  /// - Current: the model is the newest the process knows; the flight reads the store again
  ///   under its grant (the question took time a token request needs) and goes on with it.
  /// - Not current: memory forgets the model, as the announcement will make it; its save
  ///   retry checks its write. The flight reads the store again and goes on with what it holds.
  /// - No answer: in doubt, nothing is spent (forgetting the model would spend the store's
  ///   older refresh token again); the callers get the lease's error and memory keeps the
  ///   model, for the next request to ask again.
  mutating func unsavedGrantChecked(
    _ preparing: inout Preparing, _ grant: LeaseGrant, _ answer: Result<Bool, AuthCoordinatorError>,
    now: Duration
  ) -> AdvanceAction {
    switch answer {
    case .success(true):
      preparing.confirmedUnsavedGrant = grant
    case .success(false):
      unsavedModelSignedOut(under: grant)
    case .failure(let error):
      return releasing(Ending(flight: preparing.id, result: .failed(error)), holdsLease: true)
    }
    return .next(reread(&preparing, now: now))
  }

  /// The lease said a sign-out came after `grant`: memory forgets the unsaved model obtained
  /// under it (if it still holds it); its save retry, if any, only checks its earlier write.
  mutating func unsavedModelSignedOut(under grant: LeaseGrant) {
    guard case .model(let cached) = cache, cached.unsaved, cached.obtainedUnder == grant else {
      return
    }
    cache = .unknown
  }

  /// A save of a flight that is no longer current failed (its deadline passed, or it was a
  /// stopped refresh's late result): memory keeps the model unsaved if it is what memory
  /// serves. A stopped refresh's late result is taken whatever the expiries: it spent the
  /// newest refresh token this process knew (every later refresh waited for it), so the model
  /// memory holds carries a spent one, and forgetting the result would spend that again.
  mutating func staleSaveFailed(
    _ model: AuthModel, under grant: LeaseGrant?, date: Date, lateResultOf id: UInt64?
  ) {
    if let id {
      guard takeStoppedRefresh(id)?.storesResult == true else { return }
      adopt(model, obtainedAt: date, unsaved: true, under: grant)
      return
    }
    guard case .model(var cached) = cache, cached.model == model else { return }
    cached.unsaved = true
    cached.obtainedUnder = grant
    cache = .model(cached)
  }
}
