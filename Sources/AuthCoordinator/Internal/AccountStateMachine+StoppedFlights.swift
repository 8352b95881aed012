import Foundation

// Every flight ends here (``finish(_:)``), and a flight stopped before its work ended is
// recorded here, in one place (``stopped``), until its work is done with: a refresh left to
// finish, whose late result is stored (a rotated refresh token must not be lost) unless the
// user signed out since, and adopted by memory if it is newer; or a flight whose work is being
// cancelled, until the key's next flight takes it over and waits until that cancellation was
// delivered.
extension AccountStateMachine {
  /// A flight stopped before its work ended.
  struct StoppedFlight: Equatable {
    enum Fate: Equatable {
      /// Its work is cancelled (after the stripe's lock is released): the key's next flight
      /// waits until the cancellation was delivered before it starts
      /// (``AccountStateMachine/attach(_:to:)``).
      case cancelled
      /// A refresh left to finish. Its result is stored if `storesResult` (no sign-out since);
      /// until then a flight about to spend the same refresh token waits for its task.
      case refreshing(storesResult: Bool)
    }

    var fate: Fate
    /// Its effects (`nil` only for a flight nothing was attached to, in tests).
    var effects: Effects?
  }

  /// The stopped refreshes whose result may still be stored, by id: a flight about to spend the
  /// same refresh token waits for them.
  var predecessors: [UInt64] {
    stopped.filter { $0.value.fate == .refreshing(storesResult: true) }.map(\.key).sorted()
  }

  /// The effects of stopped flight `id`, if it is still recorded.
  func effects(ofStopped id: UInt64) -> Effects? { stopped[id]?.effects }

  /// Whether `id` is a stopped refresh still recorded (its abandonment deadline still matters).
  func isStoppedRefresh(_ id: UInt64) -> Bool {
    if case .refreshing = stopped[id]?.fate { return true }
    return false
  }

  /// Ends the current flight: the machine goes idle, the ending takes the flight's effects, and
  /// a flight stopped before its work ended is recorded as stopped.
  mutating func finish(_ ending: Ending) -> Ending {
    var ending = ending
    state = .idle
    if confirmingGrant == ending.flight { confirmingGrant = nil }
    if ending.saveRetry == nil, saveRetries[ending.flight] != nil { ending.leavesSaveRetry = true }
    ending.effects = effects
    effects = nil
    if ending.letsRefreshFinish {
      stopped[ending.flight] = StoppedFlight(
        fate: .refreshing(storesResult: true), effects: ending.effects)
    } else if ending.stopsWork {
      stopped[ending.flight] = StoppedFlight(fate: .cancelled, effects: ending.effects)
    }
    return ending
  }

  /// How a flight stopped while authorizing ends: a refresh in progress is left to finish and
  /// its result stored; any other authorizer's result is discarded.
  func stopped(_ authorizing: Authorizing, _ ending: Ending) -> Ending {
    guard authorizing.spendsRefreshToken else { return ending }
    var ending = ending
    ending.letsRefreshFinish = true
    ending.abandonAt = authorizing.startedAt + policy.maximumHold
    return ending
  }

  /// Removes stopped refresh `id` from the record; returns whether its result was to be stored.
  mutating func takeStoppedRefresh(_ id: UInt64) -> (storesResult: Bool, effects: Effects?)? {
    guard case .refreshing(let storesResult) = stopped[id]?.fate else { return nil }
    return (storesResult, stopped.removeValue(forKey: id)?.effects)
  }

  /// A report of a flight that is no longer the key's current one.
  mutating func stale(
    _ id: UInt64, _ outcome: StepOutcome, date: Date, now: Duration
  ) -> AdvanceAction {
    if case .grantConfirmed(let current) = outcome {
      return grantConfirmedAfterItsFlight(id, current: current, now: now)
    }
    if case .unsavedGrantChecked(let grant, .success(false)) = outcome {
      // Its flight ended while it asked (a deadline, a logout): the answer still says memory's
      // unsaved model belongs to a signed-out session.
      unsavedModelSignedOut(under: grant)
      return .ignore
    }
    if isRetryingSave(id) { return saveRetried(id, outcome, now: now) }
    let savedPastDeadline = savesPastDeadline.removeValue(forKey: id)
    switch outcome {
    case .signedOutElsewhere:
      // A save that went on past its deadline found the user signed out since its lease was
      // taken (and was undone): memory, which took the model at the deadline, forgets it, as
      // the logout's announcement would make it (this process's own undo is not heard here).
      if let savedPastDeadline { modelSignedOut(savedPastDeadline) }
      return .ignore
    case .leaseLost:
      // A save that went on past its deadline was refused: the flight had lost its grant
      // (a later holder may have stored a newer model, or the grant was revoked by a sign-out).
      // Memory forgets the model it took at the deadline: a deposed holder's result is not
      // served (rule 16), and the next request reads the store.
      if let savedPastDeadline { modelSignedOut(savedPastDeadline) }
      return .ignore
    case .authorized(let result):
      guard case .success(let model) = result, stopped[id]?.fate == .refreshing(storesResult: true)
      else {
        _ = takeStoppedRefresh(id)
        return .discardLateResult
      }
      // Still recorded until stored: a new refresh waits for it.
      return .next(Step(kind: .persistLateResult(model), deadline: nil))
    case .lateResultSaved(let model):
      // Stored, unless the user signed out meanwhile (here or elsewhere).
      guard takeStoppedRefresh(id)?.storesResult == true, let model else { return .ignore }
      if isNewer(model, at: date) { adopt(model, obtainedAt: date) }
      return .ignore
    case .lateResultSignedOut:
      // The user signed out elsewhere since the refresh's lease was taken (its save was not
      // made, or undone), and this process has not acted on it: what memory holds is the
      // ended session's (every later refresh waited for this one), so it forgets it, as the
      // sign-out's announcement would make it (fleet simulation, seed 0x31d2). A sign-out
      // heard here first emptied memory already; what it holds now came after, and stays.
      if takeStoppedRefresh(id)?.storesResult == true { cache = .unknown }
      return .ignore
    case .lateResultUnsaved(let model, let grant):
      staleSaveFailed(model, under: grant, date: date, lateResultOf: id)
      return .next(beginSaveRetry(id, model, now: now))
    case .saveFailed(let model, let grant):
      // The save deadline passed before the save failed: the model was served and cached.
      staleSaveFailed(model, under: grant, date: date, lateResultOf: nil)
      return .next(beginSaveRetry(id, model, now: now))
    default:
      return .ignore
    }
  }

  /// Whether a late result should replace what memory holds.
  func isNewer(_ model: AuthModel, at date: Date) -> Bool {
    switch cache {
    case .unknown: return false  // the next request reads the store, which holds it
    case .empty: return true
    case .model(let cached):
      if !cached.model.isValid(at: date, leeway: cached.leeway) { return true }
      // Memory's model carries a refresh token this process spent (every later refresh waited
      // for this one): the result is newer whatever the expiries, which say nothing of it
      // (randomized stress: memory kept an unsaved model over the result that spent its
      // token, and its save retry brought that token back to the store).
      if let token = cached.model.refreshToken, replacedRefreshTokens.contains(token) {
        return true
      }
      return (model.expiresAt ?? .distantFuture) > (cached.model.expiresAt ?? .distantFuture)
    }
  }

  /// The stopped refresh of flight `id` ran past the maximum hold: later flights stop waiting
  /// for its result, which, if it ever arrives, is discarded. Its work is cancelled (after the
  /// stripe's lock is released), so it is recorded as a cancelled flight: the key's next flight
  /// waits until that cancellation was delivered, and the key is kept until then. Forgotten
  /// here, a flight that started before the cancellation was delivered called the authorizer
  /// beside it (randomized stress under load, seed 0x2c21accd0ce55487).
  ///
  /// - Returns: Whether it was still recorded (the coordinator then cancels its work, opens its
  ///   latches, taken with ``effects(ofStopped:)`` before, and reports it).
  mutating func abandon(_ id: UInt64) -> Bool {
    guard let (_, effects) = takeStoppedRefresh(id) else { return false }
    if let effects { stopped[id] = StoppedFlight(fate: .cancelled, effects: effects) }
    return true
  }
}
