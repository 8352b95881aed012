import Foundation
import SyncPrimitives

// Rule 21: a model served whose save failed is retried, in the key's store order, with
// back-off, until it lands, a newer model replaces it, or a logout removes it. The flight's
// task does it after the flight ended (its callers already have the model), holding the lease,
// renewed, for at most the maximum hold.
extension AuthCoordinator {
  /// The save of flight `id`'s model failed: counted and reported (the message is the store's,
  /// which never carries a token).
  func reportUnsaved(_ key: AccountKey, flight id: UInt64, _ error: any Error) {
    table.stripe(for: key).counters.update { $0.unsavedModels += 1 }
    broadcaster.emit(.modelUnsaved(key: key, flight: id, message: "\(error)"))
  }

  /// Retries the save of `model` until it lands or is no longer needed.
  func keepSaving(
    _ model: AuthModel, _ key: AccountKey, flight id: UInt64, under held: HeldLease
  ) async {
    let stripe = table.stripe(for: key)
    // A zero delay would retry a failing store in a tight loop.
    let longest = max(configuration.maxSaveRetryDelay, .milliseconds(1))
    var delay = min(max(configuration.saveRetryDelay, .milliseconds(1)), longest)
    var failedAt = clock.now()
    var attempt = 0
    retrying: while true {
      do {
        try await clock.sleepUntil(CoordinatorClock.deadline(after: delay, from: failedAt))
      } catch { break retrying }
      attempt += 1
      // Atomic with the key's other store operations: a newer model's save or a logout's
      // removal issued before this point goes first, and then this one is not needed.
      let turn: StoreTurn? = stripe.lock.withLock {
        guard let slot = stripe.accounts[key], slot.machine.needsSave(model) else { return nil }
        stripe.counters.update { $0.saveRetries += 1 }
        return stripe.storeOperations.reserve(key)
      }
      guard let turn else { break retrying }
      switch await save(model, for: key, turn: turn, under: held, flight: id) {
      case .saved:
        stripe.lock.withLock { stripe.accounts[key]?.machine.unsavedModelSettled(model) }
        broadcaster.emit(.unsavedModelSaved(key: key))
        return
      case .failed(let error):
        broadcaster.emit(.saveRetryFailed(key: key, attempt: attempt, message: "\(error)"))
        failedAt = clock.now()
        delay = min(delay * 2, longest)
      case .leaseLost:
        // Another holder may have stored a newer model: memory follows the store again.
        stripe.lock.withLock { stripe.accounts[key]?.machine.unsavedModelSettled(model) }
        broadcaster.emit(.unsavedModelDropped(key: key))
        return
      case .signedOut:
        break retrying
      }
    }
    broadcaster.emit(.unsavedModelDropped(key: key))
  }
}
