import Foundation
import SyncPrimitives

// How a flight's task carries out each step the state machine decides: a function of its own
// per step kind (the step's work itself is in `+FlightSteps`), so that a live flight holds the
// frame of the step it is in, never one frame with room for every step's values.
extension AuthCoordinator {
  /// Calls the authorizer with the request ``prepare(_:key:flight:in:wake:)`` made.
  ///
  /// The frame of the step a flight spends longest in, so it holds only the request and the
  /// answer: the request is completed, and a failure wrapped, out of line.
  @inline(never)
  func authorizeStep(_ call: StepCall) async -> KeyMachine.StepOutcome {
    let result: Result<AuthModel, any Error>
    do {
      result = .success(try await authorizer.authorize(authorizationRequest(for: call)))
    } catch {
      result = .failure(error)
    }
    return Self.authorized(result)
  }

  @inline(never)
  static func authorized(_ result: Result<AuthModel, any Error>) -> KeyMachine.StepOutcome {
    .authorized(result.mapError(wrap))
  }

  /// The step's request; under the lease, it can confirm the grant before a second token
  /// request.
  @inline(never)
  func authorizationRequest(for call: StepCall) -> AuthorizationRequest {
    guard var request = call.step.request else {
      preconditionFailure("Internal inconsistency: an authorization without its request")
    }
    let held = call.effects.lease
    if lease != nil, let grant = held.grant, let hold = held.hold {
      let key = call.key
      let id = call.flight
      request.confirmation = { [weak self] in
        try await self?.confirmAnotherTokenRequest(key, flight: id, grant: grant, hold: hold)
      }
    }
    return request
  }

  /// Carries out one step and reports its outcome.
  typealias StepFunction = @Sendable (AuthCoordinator, StepCall) async -> KeyMachine.StepOutcome

  /// The function that carries out a step of `kind`: a function of its own per kind, with no
  /// captures (no allocation), returned out of line so that the optimizer cannot fold the
  /// kinds' frames into one: only the running step's frame exists.
  @inline(never)
  static func stepFunction(for kind: KeyMachine.StepKind) -> StepFunction {
    switch kind {
    case .load:
      return { coordinator, call in await coordinator.load(call.key, turn: call.step.storeTurn) }
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
    case .authorize:
      return { coordinator, call in await coordinator.authorizeStep(call) }
    case .persist, .persistLateResult:
      return { coordinator, call in
        let model: AuthModel
        let late: Bool
        switch call.step.kind {
        case .persist(let result): (model, late) = (result, false)
        case .persistLateResult(let result): (model, late) = (result, true)
        default: Self.wrongKind(call)
        }
        return await coordinator.persist(
          model, call.key, flight: call.flight, turn: call.step.storeTurn,
          under: call.effects.lease, late: late)
      }
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

  /// A step function called with a step of another kind: ``stepFunction(for:)`` chose it by
  /// the same kind, so this cannot happen.
  @inline(never)
  private static func wrongKind(_ call: StepCall) -> Never {
    preconditionFailure(
      "Internal inconsistency: \(call.step.kind) given to another step's function")
  }
}
