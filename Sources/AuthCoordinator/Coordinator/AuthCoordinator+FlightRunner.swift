import Foundation
import SyncPrimitives

// A flight's one task: it carries out one step at a time (load, authorize, persist) and
// reports each outcome to the state machine, which answers with the next step or the end.
extension AuthCoordinator {
  /// A step of a flight with what carrying it out needs: its place in the key's store order,
  /// or the authorizer's request.
  enum FlightStep: Sendable {
    case load(StoreTurn)
    case authorize(AuthorizationRequest)
    case persist(AuthModel, StoreTurn)
  }

  /// The flight's task. A report names the flight, so a flight that was stopped meanwhile gets
  /// no next step, and whatever it produced is discarded.
  func runFlight(_ key: AccountKey, flight id: UInt64, first: FlightStep) async {
    var next: FlightStep? = first
    while let step = next {
      let outcome: AccountStateMachine.StepOutcome
      switch step {
      case .load(let turn):
        await turn.waitForTurn()
        var model: AuthModel?
        do { model = try await store.model(for: key) } catch {
          reportStoreFailure(key, .load, error)
        }
        turn.done.open()
        // A model stored for another user is never handed out.
        outcome = .loaded(model.flatMap { $0.mcUid == key.mcUid ? $0 : nil })
      case .authorize(let request):
        do {
          let model = try await authorizer.authorize(request)
          outcome =
            model.mcUid == key.mcUid
            ? .authorized(.success(model))
            : .authorized(
              .failure(
                AuthCoordinatorError(
                  .authorizationFailed, "the authorizer returned a model for another user")))
        } catch {
          outcome = .authorized(.failure(Self.wrap(error)))
        }
      case .persist(let model, let turn):
        await turn.waitForTurn()
        do { try await store.save(model, for: key) } catch { reportStoreFailure(key, .save, error) }
        turn.done.open()
        outcome = .saved
      }
      next = advance(key, flight: id, outcome)
    }
  }

  /// Reports a step's outcome to the machine and carries out its answer.
  func advance(
    _ key: AccountKey, flight id: UInt64, _ outcome: AccountStateMachine.StepOutcome
  ) -> FlightStep? {
    let stripe = table.stripe(for: key)
    let date = configuration.now()
    let now = clock.now()
    var wake: Duration?
    stripe.lock.lock()
    var outcome = outcome
    // A model of a user whose logout did not reach the store is not served.
    if case .loaded(.some) = outcome, stripe.unremoved.covers(key.mcUid) { outcome = .loaded(nil) }
    let action: AccountStateMachine.AdvanceAction
    if let slot = stripe.accounts[key] {
      action = slot.machine.advance(id, outcome, date: date, now: now)
    } else if case .authorized = outcome {
      action = .discardLateResult
    } else {
      action = .ignore
    }
    switch action {
    case .ignore:
      stripe.lock.unlock()
      return nil
    case .discardLateResult:
      stripe.counters.update { $0.lateResultsDiscarded += 1 }
      broadcaster.emit(.lateResultDiscarded(key: key, flight: id))
      stripe.lock.unlock()
      return nil
    case .next(let step):
      let next = prepare(step, key: key, flight: id, in: stripe, wake: &wake)
      if case .authorize(let reason) = step.kind {
        broadcaster.emit(.authorizationStarted(key: key, flight: id, reason: reason))
      }
      stripe.lock.unlock()
      if let wake { scheduler.wake(by: wake) }
      return next
    case .end(let ending):
      let closing = close(ending, key: key, in: stripe)
      stripe.lock.unlock()
      carryOut(closing)
      return nil
    }
  }

  /// The bookkeeping of a step the machine decided, under the stripe's lock: its deadline, its
  /// place in the store order or its request, its counters.
  func prepare(
    _ step: AccountStateMachine.Step, key: AccountKey, flight id: UInt64, in stripe: Stripe,
    wake: inout Duration?
  ) -> FlightStep {
    if let earlier = stripe.arm(
      .init(at: step.deadline, key: key, flight: id, phase: step.kind.phase))
    {
      wake = earlier
    }
    switch step.kind {
    case .load:
      return .load(stripe.storeOperations.reserve(key))
    case .persist(let model):
      return .persist(model, stripe.storeOperations.reserve(key))
    case .authorize(let reason):
      stripe.counters.update { $0.authorizationsStarted += 1 }
      return .authorize(
        AuthorizationRequest(
          key: key, reason: reason, requestID: UUID().uuidString, replacing: nil,
          allowsInteraction: configuration.allowsInteraction,
          exchangeBegan: { [weak self] in self?.exchangeBegan(key, flight: id) }))
    }
  }

  /// The authorizer of flight `id` entered its exchange: the exchange deadline replaces the
  /// authorization deadline.
  func exchangeBegan(_ key: AccountKey, flight id: UInt64) {
    let stripe = table.stripe(for: key)
    let now = clock.now()
    var wake: Duration?
    stripe.lock.withLock {
      guard let deadline = stripe.accounts[key]?.machine.exchangeBegan(id, now: now)
      else { return }
      wake = stripe.arm(.init(at: deadline, key: key, flight: id, phase: .exchange))
    }
    if let wake { scheduler.wake(by: wake) }
  }

  static func wrap(_ error: any Error) -> AuthCoordinatorError {
    if let error = error as? AuthCoordinatorError { return error }
    if error is CancellationError {
      return AuthCoordinatorError(
        .authorizationFailed, "the authorizer was cancelled", underlying: error)
    }
    return AuthCoordinatorError(.authorizationFailed, "the authorizer failed", underlying: error)
  }
}
