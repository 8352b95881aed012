import Foundation
import SyncPrimitives

// A flight's one task: it carries out one step at a time (each a function of its own, in
// `+FlightSteps`) and reports each outcome to the state machine, which answers with the next
// step, the end, or after the end a failed save's retry (`+SaveRetry`). It keeps no lease or
// retry state: the lease is the flight's effects' (`Flight.lease`; `LeaseHoldState` decides).
extension AuthCoordinator {
  /// A step the state machine decided (its ``AccountStateMachine/StepKind``, the one enum of
  /// a flight's phases) with what carrying it out needs, taken under the stripe's lock by
  /// ``prepare(_:key:flight:in:wake:)``.
  ///
  /// A class, so that the flight's loop and each step hold a reference to it, not a copy: an
  /// async frame keeps every copy of a value that lives across a suspension, and a step is
  /// several hundred bytes.
  final class FlightStep: Sendable {
    let kind: KeyMachine.StepKind
    /// Its place in the key's store order: for a read, the lease, or a save.
    let turn: StoreTurn?
    /// For ``AccountStateMachine/StepKind/awaitPredecessors``: what the stopped refreshes open
    /// when their tasks end.
    let predecessors: [Latch]
    /// For ``AccountStateMachine/StepKind/authorize(_:replacing:)``: the authorizer's request.
    let request: BoxedRequest?

    init(
      kind: KeyMachine.StepKind, turn: StoreTurn? = nil, predecessors: [Latch] = [],
      request: AuthorizationRequest? = nil
    ) {
      self.kind = kind
      self.turn = turn
      self.predecessors = predecessors
      self.request = request.map(BoxedRequest.init)
    }

    /// Whether it is the authorization: read out of the kind by a function that is not async,
    /// so that the flight's loop holds no copy of the kind in its frame.
    var authorizes: Bool {
      @inline(never) get {
        if case .authorize = kind { true } else { false }
      }
    }

    /// A save step's model, and whether it is a stopped refresh's late result: read out of the
    /// kind by a function that is not async, so that the save step's frame holds no copy of the
    /// kind.
    var modelToSave: (model: AuthModel, late: Bool) {
      @inline(never) get {
        switch kind {
        case .persist(let model): (model, false)
        case .persistLateResult(let model): (model, true)
        default: Self.noModel(kind)
        }
      }
    }

    @inline(never)
    private static func noModel(_ kind: KeyMachine.StepKind) -> Never {
      preconditionFailure("Internal inconsistency: \(kind) has no model to save")
    }

    /// The turn of a step that has one.
    var storeTurn: StoreTurn {
      guard let turn else { Self.noTurn(kind) }
      return turn
    }

    /// Out of line: the message's interpolation, inlined, made every flight's frame larger.
    @inline(never)
    private static func noTurn(_ kind: KeyMachine.StepKind) -> Never {
      preconditionFailure("Internal inconsistency: \(kind) has no turn")
    }
  }

  /// An authorizer's request on the heap. The authorizer is called with it from there, so that
  /// the authorization step's frame, kept as long as the authorizer runs, holds a reference
  /// where the request would take 184 bytes.
  final class BoxedRequest: Sendable {
    let request: AuthorizationRequest

    init(_ request: AuthorizationRequest) { self.request = request }
  }

  /// What carrying out one step needs: the flight and the step, in one value that every step
  /// function takes (``stepFunction(for:)``).
  struct StepCall: Sendable {
    let effects: Flight
    let step: FlightStep

    var key: AccountKey { effects.key }
    var flight: UInt64 { effects.id }
  }

  /// The flight's task. A report names the flight, so a flight that was stopped meanwhile gets
  /// no next step, and whatever it produced is discarded (or, for a refresh, stored).
  ///
  /// Each step is carried out by a function of its own, called through a function value
  /// (``stepFunction(for:)``), so that the flight's own async frame holds only the loop's few
  /// values. An async function's frame holds what every branch needs at once, and every live
  /// flight carries it: with the step kinds switched over here it was 12 KB per flight, kept
  /// while the flight waited on its authorizer. Now a step's frame is allocated when the step
  /// runs and holds that step's values only (docs/benchmarks.md, "Issue 38: the flight's
  /// memory").
  @inline(never)
  func runFlight(_ effects: Flight) async {
    var authorized = false
    var next = effects.takeFirst()
    while let step = next {
      if step.authorizes { authorized = true }
      next = await Self.stepFunction(for: step)(self, StepCall(effects: effects, step: step))
    }
    let key = effects.key
    // Whatever the flight still holds when its task ends: the lease kept while an unsaved
    // model's save was retried, or that of a flight stopped before the machine had it given
    // back (the machine decides the release of a flight it ends: `releaseLease`).
    await release(effects.lease, key)
    // Only a flight that called the authorizer can have been a stopped refresh.
    if authorized { workFinished(key, effects) }
  }

  // MARK: - Running a step

  /// Publishes the grant the flight holds now, for a sign-out announcement to check
  /// (``Flight/publishedGrant``).
  func publishGrant(_ key: AccountKey, _ effects: Flight) {
    guard lease != nil else { return }
    let grant = effects.lease.grant
    table.stripe(for: key).lock.withLock { effects.publishedGrant = grant }
  }

  /// The flight's task ended: if it was a stopped refresh, the flights waiting for it go on.
  private func workFinished(_ key: AccountKey, _ effects: Flight) {
    let stripe = table.stripe(for: key)
    // Reads the flight's latch only: the threads' replicas of the stripe's models stay current
    // (every flight that authorized ends here, after its callers were answered).
    stripe.lock.withLockToRead { effects.finished }?.open()
  }

  /// Reports the outcome of the step `call` carried out: ``advance(_:flight:_:)``.
  func advance(_ call: StepCall, _ outcome: KeyMachine.StepOutcome) -> FlightStep? {
    advance(call.key, flight: call.flight, outcome)
  }

  /// Reports a step's outcome to the machine and carries out its answer.
  ///
  /// Out of line, for the step functions' frames: see ``runFlight(_:)``.
  @inline(never)
  func advance(
    _ key: AccountKey, flight id: UInt64, _ outcome: KeyMachine.StepOutcome
  ) -> FlightStep? {
    let stripe = table.stripe(for: key)
    let date = configuration.now()
    let now = clock.now()
    var wake: Duration?
    stripe.lock.lock()
    let action: KeyMachine.AdvanceAction
    if let slot = stripe.accounts[key] {
      action = slot.machine.advance(
        id, outcome, date: date, now: now, removalFailed: stripe.unremoved.covers(key.account))
    } else if case .authorized = outcome {
      action = .discardLateResult
    } else {
      action = .ignore
    }
    if case .lateResultSaved(.some) = outcome {
      stripe.counters.update { $0.lateResultsSaved += 1 }
      broadcaster.emit(.lateResultSaved(key: key, flight: id))
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
      if case .authorize(let reason, _) = step.kind {
        broadcaster.emit(.authorizationStarted(key: key, flight: id, reason: reason))
      }
      stripe.lock.unlock()
      if let wake { scheduler.wake(by: wake) }
      return next
    case .end(let ending):
      let closing = close(ending, key: key, in: stripe)
      // A model served whose save failed: the task goes on with its retry (rule 21).
      let retry = ending.saveRetry.map {
        prepare($0, key: key, flight: id, in: stripe, wake: &wake)
      }
      stripe.lock.unlock()
      carryOut(closing)
      return retry
    case .saveRetryOver(let saved):
      stripe.lock.unlock()
      broadcaster.emit(saved ? .unsavedModelSaved(key: key) : .unsavedModelDropped(key: key))
      return nil
    }
  }

  /// The bookkeeping of a step the machine decided, under the stripe's lock: its deadline, its
  /// place in the store order or its request, its counters.
  func prepare(
    _ step: KeyMachine.Step, key: AccountKey, flight id: UInt64, in stripe: Stripe,
    wake: inout Duration?
  ) -> FlightStep {
    if let deadline = step.deadline,
      let earlier = stripe.arm(.init(at: deadline, key: key, flight: id, phase: step.kind.phase))
    {
      wake = earlier
    }
    var turn: StoreTurn?
    var predecessors: [Latch] = []
    var request: AuthorizationRequest?
    switch step.kind {
    case .load, .confirmLease, .acquireLease:
      turn = stripe.storeOperations.reserve(key)
    case .persist, .persistLateResult:
      turn = stripe.storeOperations.reserve(key, writes: true, leaseCallsFollow: lease != nil)
    case .retrySave:
      stripe.counters.update { $0.saveRetries += 1 }
      turn = stripe.storeOperations.reserve(key, writes: true, leaseCallsFollow: lease != nil)
    case .checkWrite:
      turn = stripe.storeOperations.reserve(key, writes: true, leaseCallsFollow: lease != nil)
    case .awaitPredecessors:
      if let machine = stripe.accounts[key]?.machine {
        predecessors = machine.predecessors.compactMap {
          machine.effects(ofStopped: $0)?.finished
        }
      }
    case .backOff:
      stripe.counters.update { $0.refreshLoopBackoffs += 1 }
    case .awaitRetry:
      stripe.counters.update { $0.retriesScheduled += 1 }
    case .authorize(let reason, let replacing):
      stripe.counters.update { $0.authorizationsStarted += 1 }
      let progress = AuthorizationProgress(coordinator: self, key: key, flight: id)
      request = AuthorizationRequest(
        key: key, reason: reason, requestID: nil, replacing: replacing,
        // A refresh ahead runs without a caller: it never involves the user.
        allowsInteraction: configuration.allowsInteraction && reason != .refreshAhead,
        exchangeBegan: { progress.exchangeBegan() },
        interactionBegan: { progress.interactionBegan() },
        serverClock: serverClock)
    case .awaitLeaseHolder, .releaseLease, .releaseLeaseBackingOff, .awaitSaveRetry, .confirmGrant,
      .checkUnsavedGrant:
      break
    }
    // A step that reserves no store operation (the authorization, a wait) lets the key's last
    // one go if it is done: the sequencer would keep its latch until the key's next operation,
    // through the whole authorization.
    if turn == nil { stripe.storeOperations.dropFinished(key) }
    return FlightStep(kind: step.kind, turn: turn, predecessors: predecessors, request: request)
  }

  /// Where the request's progress closures report, for flight `id` of `key`. Both closures
  /// capture this one object and nothing else, so each uses it as its context: one allocation
  /// for the two, where two closures capturing the coordinator weakly, the key and the number
  /// made four.
  final class AuthorizationProgress: Sendable {
    /// A weak reference in a value of its own: `weak let` needs Swift 6.2.3, and the package
    /// builds with 6.2.
    private struct WeakCoordinator: Sendable {
      weak var value: AuthCoordinator?
    }

    private let coordinator: WeakCoordinator
    let key: AccountKey
    let id: UInt64

    init(coordinator: AuthCoordinator, key: AccountKey, flight id: UInt64) {
      self.coordinator = WeakCoordinator(value: coordinator)
      self.key = key
      self.id = id
    }

    func exchangeBegan() { coordinator.value?.exchangeBegan(key, flight: id) }

    func interactionBegan() { coordinator.value?.interactionBegan(key, flight: id) }
  }

  /// The authorizer of flight `id` entered its exchange: for an interactive authorizer, the
  /// exchange deadline replaces the authorization deadline.
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

  /// The authorizer of flight `id` turned to the user: its failures are interactive ones from
  /// now on.
  func interactionBegan(_ key: AccountKey, flight id: UInt64) {
    let stripe = table.stripe(for: key)
    stripe.lock.withLock { stripe.accounts[key]?.machine.interactionBegan(id) }
  }

  @inline(never)
  static func wrap(_ error: any Error) -> AuthCoordinatorError {
    if let error = error as? AuthCoordinatorError { return error }
    if error is CancellationError || (error as? URLError)?.code == .cancelled {
      return AuthCoordinatorError(
        .authorizationFailed, "the authorizer was cancelled", underlying: error)
    }
    if let error = error as? URLError {
      return AuthCoordinatorError(
        .networkError, "the authorizer's request failed in transport", underlying: error)
    }
    if let error = error as? any ClassifiedError {
      return AuthCoordinatorError(
        .authorizationFailed, "the authorizer failed", underlying: error,
        transient: error.isTransient)
    }
    return AuthCoordinatorError(.authorizationFailed, "the authorizer failed", underlying: error)
  }
}
