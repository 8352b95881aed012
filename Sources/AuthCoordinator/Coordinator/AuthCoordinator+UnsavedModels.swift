import Foundation
import SyncPrimitives

// Rule 21: a model served whose save failed is retried, in the key's store order, with
// back-off, until it lands, a newer model replaces it, or a logout removes it. The state machine
// decides each wait and attempt (`AccountStateMachine+SaveRetry`); the flight's task carries
// them out after the flight ended (its callers already have the model), holding the lease,
// renewed, for at most the maximum hold.
extension AuthCoordinator {
  /// The save of flight `id`'s model failed: counted and reported (the message is the store's,
  /// which never carries a token).
  func reportUnsaved(_ key: AccountKey, flight id: UInt64, _ error: any Error) {
    table.stripe(for: key).counters.update { $0.unsavedModels += 1 }
    broadcaster.emit(.modelUnsaved(key: key, flight: id, message: "\(error)"))
  }

  /// The wait before the next attempt.
  @inline(never)
  func awaitSaveRetry(until: Duration) async -> KeyMachine.StepOutcome {
    do {
      try await clock.sleepUntil(until)
      return .backedOff
    } catch {
      return .waitCancelled
    }
  }

  /// Attempt `attempt` at saving `model` again; with `confirmingGrant`, only once the lease
  /// answered that the retry's grant is current (``KeyMachine/StepKind/retrySave(_:attempt:confirmingGrant:)``).
  @inline(never)
  func retrySave(
    _ model: AuthModel, _ key: AccountKey, flight id: UInt64, attempt: Int,
    confirmingGrant: Bool = false, turn: StoreTurn, under held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    switch await save(
      model, for: key, turn: turn, under: held, flight: id, retry: true,
      confirmingGrant: confirmingGrant)
    {
    case .saved: return .saved
    case .failed(let error):
      broadcaster.emit(.saveRetryFailed(key: key, attempt: attempt, message: "\(error)"))
      return .saveFailed(model)
    case .leaseLost: return .leaseLost
    case .signedOut: return .signedOutElsewhere
    }
  }

  /// Whether a sign-out came since `grant`, under which memory's unsaved model was obtained
  /// (``KeyMachine/StepKind/checkUnsavedGrant(_:)``): asked three times at most while the lease
  /// cannot answer (each failure reported).
  @inline(never)
  func checkUnsavedGrant(_ grant: LeaseGrant) async -> KeyMachine.StepOutcome {
    switch await checkAfterWrite(grant) {
    case .current: return .unsavedGrantChecked(grant, .success(true))
    case .notCurrent: return .unsavedGrantChecked(grant, .success(false))
    case .unknown(let error):
      return .unsavedGrantChecked(
        grant,
        .failure(
          AuthCoordinatorError(
            .storeFailed,
            "the cross-process lease could not say whether the user signed out since the unsaved"
              + " model was obtained", underlying: error)))
    }
  }

  /// Whether an earlier attempt's write of `model`, which memory let go, came after a sign-out
  /// elsewhere: asked of the lease (never "in doubt, yes": an answer is waited for), and
  /// undone where the store still holds the write.
  @inline(never)
  func checkWrite(
    _ model: AuthModel, _ key: AccountKey, turn: StoreTurn, under held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    defer { turn.finish() }
    switch await settleEarlierWrite(of: model, for: key, grant: held.grant) {
    case .stands: return .saved
    case .undone: return .signedOutElsewhere
    case .unknown: return .saveFailed(model)
    }
  }

  /// What became of an earlier write that may have come after a sign-out elsewhere.
  enum EarlierWrite {
    /// No sign-out since the grant was taken (or no lease): the write stands, if it was made.
    case stands
    /// A sign-out came first: the write was removed where the store still held it.
    case undone
    /// The lease could not answer (reported).
    case unknown(any Error)
  }

  /// Asks the lease whether `grant`, under which an earlier attempt may have written `model`,
  /// is current (never "in doubt, yes"), and undoes the write if not (``undoWrite(of:for:)``).
  func settleEarlierWrite(
    of model: AuthModel, for key: AccountKey, grant: LeaseGrant?
  ) async -> EarlierWrite {
    guard let grant, let lease else { return .stands }
    do {
      guard try await !lease.isCurrent(grant) else { return .stands }
    } catch {
      reportStoreFailure(key, .lease, error)
      return .unknown(error)
    }
    await undoWrite(of: model, for: key)
    return .undone
  }
}
