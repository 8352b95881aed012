import Foundation

// Rule 21's retries, decided here: a model served whose save failed is saved again, in the
// key's store order, after a wait that doubles with each failure (the configuration's
// `saveRetryDelay`, up to `maxSaveRetryDelay`), until it lands, a newer model replaces it, a
// logout removes it, or the flight's lease turns out lost. A retry that memory no longer needs
// checks, before it ends, that no earlier attempt's write came after a sign-out (rule 19).
// The flight's task carries the steps out after the flight ended (its callers already have
// the model), holding the lease.
extension AccountStateMachine {
  /// A save being retried by the task of the flight that produced the model.
  struct SaveRetry: Equatable {
    var model: AuthModel
    /// Attempts made so far.
    var attempts = 0
    /// The wait before the next attempt.
    var delay: Duration
    /// Memory let the model go: the retry only checks that no earlier write of it came after
    /// a sign-out (``StepKind/checkWrite(_:)``).
    var checksOnly = false
    /// Memory forgot the model on a sign-out announced elsewhere (cleared by a logout here).
    /// The announcement may be late, and the retry's grant a newer session's: whether
    /// the sign-out predates the grant is the lease's to say, so the retry goes on, writing
    /// only on the lease's answer (``StepKind/retrySave(_:attempt:confirmingGrant:)``).
    var forgottenOnAnnouncement = false
    /// A logout here removed the store's models since: the retry writes nothing again.
    var removedHere = false
  }

  /// A sign-out was announced elsewhere and memory forgets its model: a retry of the model
  /// memory held unsaved goes on until the lease says whether the sign-out predates its grant
  /// (``SaveRetry/forgottenOnAnnouncement``). Found by the fleet simulation's 1,000,000-seed
  /// run (seed 0xf382c): a notice 4.5 s late emptied memory, the retry then only checked its
  /// grant (current) and ended, and the store kept the spent refresh token the model's
  /// refresh had rotated.
  mutating func retriesOutliveAnnouncement() {
    // (Called before memory forgets.)
    guard case .model(let cached) = cache, cached.unsaved else { return }
    for (id, retry) in saveRetries where retry.model == cached.model && !retry.checksOnly {
      saveRetries[id]?.forgottenOnAnnouncement = true
    }
  }

  /// The longest wait between two attempts: never zero, which would retry a failing store in
  /// a tight loop.
  private var longestSaveRetryDelay: Duration {
    max(policy.maxSaveRetryDelay, .milliseconds(1))
  }

  /// The save of `model` by flight `id` failed at `now`: the first wait of its retry. When
  /// memory does not hold the model unsaved (a save past its deadline whose model a sign-out's
  /// announcement or a newer model replaced), nothing is saved again, but the retry still
  /// checks the write the failed save may have made (``StepKind/checkWrite(_:)``): a write
  /// whose checks after it failed may have come after a sign-out (fleet simulation, seed
  /// 0x10853).
  mutating func beginSaveRetry(_ id: UInt64, _ model: AuthModel, now: Duration) -> Step {
    let delay = min(max(policy.saveRetryDelay, .milliseconds(1)), longestSaveRetryDelay)
    saveRetries[id] = SaveRetry(model: model, delay: delay)
    return awaitSaveRetry(after: delay, now: now)
  }

  func awaitSaveRetry(after delay: Duration, now: Duration) -> Step {
    Step(
      kind: .awaitSaveRetry(until: CoordinatorClock.deadline(after: delay, from: now)),
      deadline: nil)
  }

  /// Whether memory holds a model newer than `model`: another one, carrying a refresh token
  /// that no authorization of this process replaced (a read after an announcement may bring
  /// back `model`'s predecessor, which is older; rule 21's ``preferred(overStored:)``).
  func holdsNewerModel(than model: AuthModel) -> Bool {
    guard case .model(let cached) = cache, cached.model != model else { return false }
    guard let token = cached.model.refreshToken else { return false }
    return !replacedRefreshTokens.contains(token)
  }

  /// Whether a flight's outcome will say if `model` still needs saving: the flight in progress
  /// spends its refresh token, or saves a model obtained since that token was spent, or a
  /// stopped refresh left to finish may have spent it. A retry saved meanwhile would land in
  /// the store after the newer model and bring back the spent refresh token, which the next
  /// refresh would send again (randomized stress with refresh tokens, a slow store and failing
  /// saves, 2026-12-06).
  func replacementPending(for model: AuthModel) -> Bool {
    guard let token = model.refreshToken, replacedRefreshTokens.contains(token) else {
      return false
    }
    if !predecessors.isEmpty { return true }
    switch state {
    case .authorizing(let authorizing): return authorizing.spentRefreshToken == token
    case .persisting: return true
    default: return false
    }
  }

  /// Whether flight `id` is retrying a save (its outcomes are the retry's).
  func isRetryingSave(_ id: UInt64) -> Bool { saveRetries[id] != nil }

  /// A step of flight `id`'s save retry finished with `outcome` at `now`.
  mutating func saveRetried(_ id: UInt64, _ outcome: StepOutcome, now: Duration) -> AdvanceAction {
    guard var retry = saveRetries[id] else { return .ignore }
    switch outcome {
    case .backedOff:
      // Atomic with the key's other store operations (the coordinator reserves the save's
      // turn under the same lock): a newer model's save or a logout's removal issued before
      // this point goes first, and then this one is not needed.
      let writes =
        (retry.forgottenOnAnnouncement && !retry.checksOnly && !holdsNewerModel(than: retry.model))
        || needsSave(retry.model)
      if writes, replacementPending(for: retry.model) {
        // A save issued now would land after the newer model's: it waits again.
        return .next(awaitSaveRetry(after: retry.delay, now: now))
      }
      retry.attempts += 1
      // Memory forgot it on an announcement, and holds nothing newer: the lease decides.
      if retry.forgottenOnAnnouncement, !retry.checksOnly, !holdsNewerModel(than: retry.model) {
        saveRetries[id] = retry
        return .next(
          Step(
            kind: .retrySave(retry.model, attempt: retry.attempts, confirmingGrant: true),
            deadline: nil))
      }
      guard needsSave(retry.model) else {
        // Memory let the model go, but an earlier attempt may have written it after a
        // sign-out elsewhere, with checks after the write that failed: the question outlives
        // memory's model, or the write would stay in the store for every process to serve
        // (fleet simulation, seed 0x10853). Asked once the lease answers.
        retry.checksOnly = true
        saveRetries[id] = retry
        return .next(Step(kind: .checkWrite(retry.model), deadline: nil))
      }
      saveRetries[id] = retry
      return .next(Step(kind: .retrySave(retry.model, attempt: retry.attempts), deadline: nil))
    case .saveFailed:
      retry.delay = min(retry.delay * 2, longestSaveRetryDelay)
      saveRetries[id] = retry
      return .next(awaitSaveRetry(after: retry.delay, now: now))
    case .saved:
      // A check that found the grant current saved nothing: the model was let go.
      unsavedModelSettled(retry.model)
      return endSaveRetry(id, saved: !retry.checksOnly)
    case .leaseLost:
      // Another holder may have stored a newer model: memory follows the store again.
      unsavedModelSettled(retry.model)
      return endSaveRetry(id, saved: false)
    case .signedOutElsewhere:
      // The retry found the user signed out since its lease was taken, and undid its save:
      // memory must not go on serving the model until the logout's announcement arrives
      // (which this process's own undo does not make it hear).
      modelSignedOut(retry.model)
      return endSaveRetry(id, saved: false)
    case .waitCancelled:
      return endSaveRetry(id, saved: false)
    default:
      preconditionFailure("Internal inconsistency: \(outcome) reported by a save retry")
    }
  }

  private mutating func endSaveRetry(_ id: UInt64, saved: Bool) -> AdvanceAction {
    saveRetries[id] = nil
    return .saveRetryOver(saved: saved)
  }
}
