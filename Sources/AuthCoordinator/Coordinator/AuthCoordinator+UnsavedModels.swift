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

  /// Attempt `attempt` at saving `model` again.
  @inline(never)
  func retrySave(
    _ model: AuthModel, _ key: AccountKey, flight id: UInt64, attempt: Int, turn: StoreTurn,
    under held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    switch await save(model, for: key, turn: turn, under: held, flight: id, retry: true) {
    case .saved: return .saved
    case .failed(let error):
      broadcaster.emit(.saveRetryFailed(key: key, attempt: attempt, message: "\(error)"))
      return .saveFailed(model)
    case .leaseLost: return .leaseLost
    case .signedOut: return .signedOutElsewhere
    }
  }
}
