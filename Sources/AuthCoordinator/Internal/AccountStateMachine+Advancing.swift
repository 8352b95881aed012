import Foundation

// A step of the current flight finished: the machine decides what comes next, from the phase
// and the outcome (the loading, preparing and authorizing phases hand over to their files; the
// persisting and releasing phases are decided here).
extension AccountStateMachine {
  /// A step of flight `id` finished with `outcome`.
  ///
  /// - Parameter removalFailed: A logout of the key's user did not reach the store (the
  ///   coordinator's `UnremovedUsers`): what the store holds for the user is not served.
  mutating func advance(
    _ id: UInt64, _ outcome: StepOutcome, date: Date, now: Duration, removalFailed: Bool = false
  ) -> AdvanceAction {
    let outcome = ownUsers(outcome, removalFailed: removalFailed)
    guard flightID == id else { return stale(id, outcome, date: date, now: now) }
    let action = decide(id, outcome, date: date, now: now)
    guard case .end(let ending) = action else { return action }
    if let confirm = confirmation(before: ending, now: now) { return .next(confirm) }
    return .end(finish(ending))
  }

  /// What the current flight does after `outcome`.
  private mutating func decide(
    _ id: UInt64, _ outcome: StepOutcome, date: Date, now: Duration
  ) -> AdvanceAction {
    switch (state, outcome) {
    case (.loading(let loading), .loaded(let model)):
      return loaded(loading, model, date: date, now: now)
    case (.preparing(let preparing), _):
      return prepared(preparing, outcome, date: date, now: now)
    case (.authorizing(let authorizing), .authorized(.success(let model))):
      persistingRejections = authorizing.rejectedTokens
      state = .persisting(id: id, model: model, holdsLease: authorizing.holdsLease)
      return .next(step(.persist(model), now: now))
    case (.authorizing(let authorizing), .authorized(.failure(let error))):
      // A silent authorizer's transient failure may be retried; a failure needs the lease no
      // more otherwise (another process may try at once).
      return authorizationFailed(authorizing, error, date: date, now: now)
    case (.persisting(_, let model, let holdsLease), .saved):
      adopt(model, obtainedAt: date)
      if signOutCheck?.flight == id { signOutCheck?.model = model }
      guard !Self.expired(model, at: date) else {
        return releasing(
          Ending(flight: id, result: .failed(expiredBeforeServed())), holdsLease: holdsLease)
      }
      return releasing(Ending(flight: id, result: .succeeded(model)), holdsLease: holdsLease)
    case (.persisting, .leaseLost):
      // Lost already: nothing to give back. Never served (rule 16): the store is read.
      return .next(deposed(id, now: now))
    case (.releasing(var ending), .grantConfirmed(let current)):
      return .end(grantConfirmed(&ending, current: current))
    case (.releasing(var ending), .leaseReleased):
      // Rule 10 at the end of the release too: a pause while the lease went back may outlast
      // a short token's life (fleet simulation, seed 0xf22ff).
      if case .succeeded(let model) = ending.result, Self.expired(model, at: date) {
        ending.result = .failed(expiredBeforeServed())
      }
      return .end(ending)
    case (.persisting(_, let model, _), .saveFailed(_, let grant)):
      // Served all the same (rule 10), and kept: the store may hold the model it replaced,
      // whose refresh token the authorizer may have spent (rule 21). The lease is kept, renewed,
      // while the save is retried, so that no other process spends that refresh token.
      adopt(model, obtainedAt: date, unsaved: true, under: grant)
      if signOutCheck?.flight == id { signOutCheck?.model = model }
      state = .idle
      var ending = Ending(
        flight: id,
        result: Self.expired(model, at: date) ? .failed(expiredBeforeServed()) : .succeeded(model))
      ending.saveRetry = beginSaveRetry(id, model, now: now)
      return .end(ending)
    case (.persisting(_, _, let holdsLease), .signedOutElsewhere):
      return releasing(signedOut(elsewhere: true)!, holdsLease: holdsLease)
    default:
      preconditionFailure("Internal inconsistency: \(outcome) reported in phase \(state)")
    }
  }

  /// Ends the flight with `ending`, after giving the lease back when it holds one. A failure
  /// the key remembers (a cooldown) is handed to the lease as a back-off, so that no other
  /// process tries before it ends.
  mutating func releasing(_ ending: Ending, holdsLease: Bool) -> AdvanceAction {
    guard holdsLease else {
      state = .idle
      return .end(ending)
    }
    state = .releasing(ending)
    if let duration = ending.cooldown, case .failed(let error) = ending.result {
      let backOff = LeaseBackOff(
        duration: duration, failures: transientFailures, code: error.code.rawValue)
      return .next(Step(kind: .releaseLeaseBackingOff(backOff), deadline: nil))
    }
    return .next(Step(kind: .releaseLease, deadline: nil))
  }
}
