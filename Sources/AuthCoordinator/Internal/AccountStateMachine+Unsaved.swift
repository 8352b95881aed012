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

  /// What a re-read should go on with, given what the store returned: the store is the shared
  /// truth, except that an unsaved model in memory is kept over any stored one, until it is
  /// settled (stored, or refused by the fence because a later holder of the lease saved) or
  /// replaced. While it is unsaved its flight holds the lease, so no other process can have
  /// stored a newer model; the stored one is older and its refresh token may be spent. (An
  /// expiry says nothing of which is newer: lifetimes vary from one grant to the next.)
  func preferred(overStored stored: AuthModel?) -> AuthModel? {
    guard case .model(let cached) = cache, cached.unsaved else { return stored }
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
