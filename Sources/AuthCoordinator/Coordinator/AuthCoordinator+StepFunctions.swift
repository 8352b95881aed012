import Foundation
import SyncPrimitives

// How a flight's task carries out each step the state machine decides: a function of its own
// per step kind (the step's work itself is in `+FlightSteps`), so that a live flight holds the
// frame of the step it is in, never one frame with room for every step's values.
extension AuthCoordinator {
  /// Calls the authorizer with the request ``prepare(_:key:flight:in:wake:)`` made, and reports
  /// its answer.
  ///
  /// The frame of the step a flight spends longest in, so it holds only a reference to the
  /// request and room for the answer: the request is completed, and the outcome made and
  /// reported, out of line. The answer is passed on as it came, a model or an error: a
  /// `Result` made here took two more model-sized temporaries in this frame, which then no
  /// longer fitted in the task's first slab beside the flight's loop.
  @inline(never)
  func authorizeStep(_ call: StepCall) async -> FlightStep? {
    let boxed = authorizationRequest(for: call)
    do {
      return authorized(call, try await authorizer.authorize(boxed.request))
    } catch {
      return authorizationFailed(call, error)
    }
  }

  @inline(never)
  func authorized(_ call: StepCall, _ model: AuthModel) -> FlightStep? {
    advance(call, .authorized(.success(model)))
  }

  @inline(never)
  func authorizationFailed(_ call: StepCall, _ error: any Error) -> FlightStep? {
    advance(call, .authorized(.failure(Self.wrap(error))))
  }

  /// The step's request; under the lease, it can confirm the grant before a second token
  /// request.
  @inline(never)
  func authorizationRequest(for call: StepCall) -> BoxedRequest {
    guard let boxed = call.step.request else {
      preconditionFailure("Internal inconsistency: an authorization without its request")
    }
    let held = call.effects.lease
    guard lease != nil, let grant = held.grant, let hold = held.hold else { return boxed }
    var request = boxed.request
    let key = call.key
    let id = call.flight
    request.confirmation = { [weak self] in
      try await self?.confirmAnotherTokenRequest(key, flight: id, grant: grant, hold: hold)
    }
    return BoxedRequest(request)
  }

  /// Carries out one step, reports its outcome to the machine (``advance(_:_:)``) and returns
  /// the next step the machine decided, if any.
  ///
  /// The function reports the outcome itself, after its last suspension: an outcome returned to
  /// the flight's loop would need room in the loop's frame, which lives as long as the flight.
  typealias StepFunction = @Sendable (AuthCoordinator, StepCall) async -> FlightStep?

  /// The function that carries out `step`.
  ///
  /// The steps of every cold flight (the read, the authorization, the step a flight spends
  /// longest in, and the save) report their outcomes from their own frames. Every other step
  /// is carried out by its kind's function (``outcomeFunction(for:)``) inside one that reports
  /// the outcome: that one's frame holds the outcome while the step runs.
  @inline(never)
  static func stepFunction(for step: FlightStep) -> StepFunction {
    switch step.kind {
    case .load: return { coordinator, call in await coordinator.loadStep(call) }
    case .authorize: return { coordinator, call in await coordinator.authorizeStep(call) }
    case .persist, .persistLateResult:
      return { coordinator, call in await coordinator.persistStep(call) }
    default: break
    }
    return { coordinator, call in
      coordinator.advance(call, await Self.outcomeFunction(for: call.step)(coordinator, call))
    }
  }

  /// Carries out one step and returns its outcome.
  typealias OutcomeFunction =
    @Sendable (AuthCoordinator, StepCall) async -> KeyMachine.StepOutcome

  /// The function that carries out `step`, other than the read, the authorization and the save
  /// (those report their own outcomes: ``stepFunction(for:)``): a function of its own per kind,
  /// with no captures (no allocation), returned out of line so that the optimizer cannot fold
  /// the kinds' frames into one: only the running step's frame exists.
  @inline(never)
  private static func outcomeFunction(for step: FlightStep) -> OutcomeFunction {
    switch step.kind {
    case .awaitPredecessors:
      return { coordinator, call in
        await coordinator.awaitAll(call.step.predecessors)
        return .predecessorsFinished
      }
    case .acquireLease:
      return { coordinator, call in
        let outcome = await coordinator.acquireLease(
          call.key, flight: call.flight, turn: call.step.storeTurn, into: call.effects.lease)
        coordinator.publishGrant(call.key, call.effects)
        return outcome
      }
    case .confirmLease:
      return { coordinator, call in
        let outcome = await coordinator.confirmLease(
          call.key, flight: call.flight, turn: call.step.storeTurn, held: call.effects.lease)
        coordinator.publishGrant(call.key, call.effects)
        return outcome
      }
    case .awaitLeaseHolder:
      return { coordinator, call in
        guard case .awaitLeaseHolder(let wait) = call.step.kind else { Self.wrongKind(call) }
        await coordinator.awaitLeaseHolder(for: wait, after: call.effects.lease.seenVersion)
        return .leaseHolderChanged
      }
    case .releaseLease:
      return { coordinator, call in
        await coordinator.release(call.effects.lease, call.key)
        coordinator.publishGrant(call.key, call.effects)
        return .leaseReleased
      }
    case .releaseLeaseBackingOff:
      return { coordinator, call in
        guard case .releaseLeaseBackingOff(let backOff) = call.step.kind else {
          Self.wrongKind(call)
        }
        await coordinator.release(call.effects.lease, call.key, backingOff: backOff)
        coordinator.publishGrant(call.key, call.effects)
        return .leaseReleased
      }
    case .backOff:
      return { coordinator, call in
        guard case .backOff(let until, let delay) = call.step.kind else { Self.wrongKind(call) }
        await coordinator.backOff(call.key, until: until, delay: delay)
        return .backedOff
      }
    case .awaitRetry:
      return { coordinator, call in
        guard case .awaitRetry(let until, let attempt, let delay, let code) = call.step.kind else {
          Self.wrongKind(call)
        }
        await coordinator.awaitRetry(
          call.key, flight: call.flight, until: until, attempt: attempt, delay: delay, code: code)
        return .backedOff
      }
    case .load, .authorize, .persist, .persistLateResult:
      // Carried out by a function that reports its own outcome (`stepFunction(for:)`).
      return { _, call in Self.wrongKind(call) }
    case .awaitSaveRetry:
      return { coordinator, call in
        guard case .awaitSaveRetry(let until) = call.step.kind else { Self.wrongKind(call) }
        return await coordinator.awaitSaveRetry(until: until)
      }
    case .retrySave:
      return { coordinator, call in
        guard case .retrySave(let model, let attempt, let confirmingGrant) = call.step.kind else {
          Self.wrongKind(call)
        }
        return await coordinator.retrySave(
          model, call.key, flight: call.flight, attempt: attempt,
          confirmingGrant: confirmingGrant, turn: call.step.storeTurn, under: call.effects.lease)
      }
    case .checkWrite:
      return { coordinator, call in
        guard case .checkWrite(let model) = call.step.kind else { Self.wrongKind(call) }
        return await coordinator.checkWrite(
          model, call.key, turn: call.step.storeTurn, under: call.effects.lease)
      }
    case .confirmGrant:
      return { coordinator, call in
        guard case .confirmGrant(let grant) = call.step.kind else { Self.wrongKind(call) }
        return .grantConfirmed(current: await coordinator.grantOutlivesAnnouncement(grant))
      }
    case .checkUnsavedGrant:
      return { coordinator, call in
        guard case .checkUnsavedGrant(let grant) = call.step.kind else { Self.wrongKind(call) }
        return await coordinator.checkUnsavedGrant(grant)
      }
    }
  }

  /// A step function called with a step of another kind: ``stepFunction(for:)`` and
  /// ``outcomeFunction(for:)`` chose it by the same kind, so this cannot happen.
  @inline(never)
  private static func wrongKind(_ call: StepCall) -> Never {
    preconditionFailure(
      "Internal inconsistency: \(call.step.kind) given to another step's function")
  }
}
