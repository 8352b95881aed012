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
  func preferred(overStored stored: AuthModel?) -> AuthModel? {
    guard case .model(let cached) = cache, cached.unsaved else { return stored }
    if let stored, stored != cached.model, let token = stored.refreshToken,
      !replacedRefreshTokens.contains(token)
    {
      return stored
    }
    return cached.model
  }

  /// A save of a flight that is no longer current failed (its deadline passed, or it was a
  /// stopped refresh's late result): memory keeps the model unsaved if it is what memory
  /// serves. A stopped refresh's late result is taken whatever the expiries: it spent the
  /// newest refresh token this process knew (every later refresh waited for it), so the model
  /// memory holds carries a spent one, and forgetting the result would spend that again.
  mutating func staleSaveFailed(_ model: AuthModel, date: Date, lateResultOf id: UInt64?) {
    if let id {
      guard takeStoppedRefresh(id)?.storesResult == true else { return }
      adopt(model, obtainedAt: date, unsaved: true)
      return
    }
    guard case .model(var cached) = cache, cached.model == model else { return }
    cached.unsaved = true
    cache = .model(cached)
  }
}
