import Foundation
import SyncPrimitives

// A flight's one task: it carries out one step at a time (read the store, wait for a stopped
// refresh, take or wait for the cross-process lease, authorize, persist) and reports each
// outcome to the state machine, which answers with the next step or the end. It holds the
// flight's lease and renews it; the machine says when to give it back (`releaseLease`: before
// the callers get a result, unless a save is to be retried).
extension AuthCoordinator {
  /// A step the state machine decided (its ``AccountStateMachine/StepKind``, the one enum of
  /// a flight's phases) with what carrying it out needs, taken under the stripe's lock by
  /// ``prepare(_:key:flight:in:wake:)``.
  struct FlightStep: Sendable {
    let kind: KeyMachine.StepKind
    /// Its place in the key's store order: for a read, the lease, or a save.
    var turn: StoreTurn?
    /// For ``AccountStateMachine/StepKind/awaitPredecessors``: what the stopped refreshes open
    /// when their tasks end.
    var predecessors: [Latch] = []
    /// For ``AccountStateMachine/StepKind/authorize(_:replacing:)``: the authorizer's request.
    var request: AuthorizationRequest?

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

  /// The flight's task. A report names the flight, so a flight that was stopped meanwhile gets
  /// no next step, and whatever it produced is discarded (or, for a refresh, stored).
  ///
  /// Each step is carried out by a function of its own, kept out of line: an async function's
  /// frame holds what every branch needs at once, and every live flight carries its frame.
  /// With the steps written inline it was 14 KB per flight (docs/benchmarks.md, "Thresholds");
  /// now it is about 3 KB, and each step's own frame exists only while the step runs.
  func runFlight(
    _ key: AccountKey, flight id: UInt64, effects: Flight, first: FlightStep
  ) async {
    let held = HeldLease()
    var authorized = false
    // A model served whose save failed: the task retries it once the flight is over (rule 21).
    var unsaved: AuthModel?
    var next: FlightStep? = first
    while let step = next {
      let outcome: KeyMachine.StepOutcome
      switch step.kind {
      case .load:
        outcome = await load(key, turn: step.storeTurn)
      case .awaitPredecessors:
        await awaitAll(step.predecessors)
        outcome = .predecessorsFinished
      case .acquireLease:
        outcome = await acquireLease(key, flight: id, turn: step.storeTurn, into: held)
      case .confirmLease:
        outcome = await confirmLease(key, flight: id, turn: step.storeTurn, held: held)
      case .awaitLeaseHolder(let wait):
        await awaitLeaseHolder(for: wait, after: held.seenVersion)
        outcome = .leaseHolderChanged
      case .releaseLease:
        await release(held, key)
        outcome = .leaseReleased
      case .releaseLeaseBackingOff(let backOff):
        await release(held, key, backingOff: backOff)
        outcome = .leaseReleased
      case .backOff(let until, let delay):
        await backOff(key, until: until, delay: delay)
        outcome = .backedOff
      case .awaitRetry(let until, let attempt, let delay, let code):
        await awaitRetry(key, flight: id, until: until, attempt: attempt, delay: delay, code: code)
        outcome = .backedOff
      case .authorize:
        authorized = true
        // Through a function value, on purpose: called directly, the optimizer folded this
        // step's frame into the flight's, which grew from 3 KB to 10 KB.
        outcome = await Self.opaque(authorize)(step.request)
      case .persist(let model):
        outcome = await persist(
          model, key, flight: id, turn: step.storeTurn, under: held, unsaved: &unsaved)
      case .persistLateResult(let model):
        outcome = await persistLateResult(
          model, key, flight: id, turn: step.storeTurn, under: held, unsaved: &unsaved)
      }
      next = advance(key, flight: id, outcome)
    }
    if let unsaved { await keepSaving(unsaved, key, flight: id, under: held) }
    // Whatever the flight still holds when its task ends: the lease kept while an unsaved
    // model's save was retried, or that of a flight stopped before the machine had it given
    // back (the machine decides the release of a flight it ends: `releaseLease`).
    await release(held, key)
    // Only a flight that called the authorizer can have been a stopped refresh.
    if authorized { workFinished(key, effects) }
  }

  // MARK: - The steps, each out of line

  /// `body`, as a value the optimizer cannot see through: a call through it allocates the
  /// callee's frame when it runs, and only then.
  @inline(never)
  private static func opaque<Argument, Result>(
    _ body: @escaping (Argument) async -> Result
  ) -> (Argument) async -> Result { body }

  /// Reads the store in its turn; a failure is reported and reads as nothing stored.
  @inline(never)
  private func load(_ key: AccountKey, turn: StoreTurn) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    var model: AuthModel?
    do { model = try await store.model(for: key) } catch {
      reportStoreFailure(key, .load, error)
    }
    turn.done.open()
    return .loaded(model)
  }

  /// Rule 16's guard before a token request: the store is read, then the grant renewed. A
  /// renewal that succeeds after the read proves no other process held the lease since it was
  /// taken, so what was read is what the next token request may spend, and a whole time to live
  /// lies ahead. A grant lost or given up reads as lost; a renewal that cannot be made (the
  /// lease's storage failed) confirms the grant only while it is known to stay this flight's
  /// for a third of its time to live.
  @inline(never)
  private func confirmLease(
    _ key: AccountKey, flight id: UInt64, turn: StoreTurn, held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    defer { turn.done.open() }
    var model: AuthModel?
    do { model = try await store.model(for: key) } catch {
      reportStoreFailure(key, .load, error)
    }
    guard let grant = held.grant, let lease, let hold = held.hold, hold.isHeld else {
      await release(held, key)
      return .leaseLost
    }
    let ttl = configuration.leaseTimeToLive
    // The renewal counts from when it was sent: one that took long to come back (a pause, a
    // slow database) may have left too little of the grant, or none, for a token request.
    let sent = clock.now()
    do {
      guard try await lease.renew(grant, timeToLive: ttl) != nil else {
        lost(hold, key, flight: id)
        await release(held, key)
        return .leaseLost
      }
      hold.renewed(at: sent, timeToLive: ttl)
    } catch {
      reportStoreFailure(key, .lease, error)
    }
    guard hold.isHeld(for: ttl / 3, at: clock.now()) else {
      // Too near its lapse, or in doubt and near it: no token request. The grant is given up
      // and the flight takes the lease again.
      await release(held, key)
      return .leaseLost
    }
    return .loaded(model)
  }

  /// Waits until every stopped refresh the key waits for has finished.
  @inline(never)
  private func awaitAll(_ latches: [Latch]) async {
    for latch in latches { await latch.wait() }
  }

  /// Until the holder announces a change, or its lease lapses (then it is taken over).
  @inline(never)
  private func awaitLeaseHolder(for wait: Duration, after version: UInt64) async {
    await leaseWatch.wait(after: version, until: clock.deadline(after: wait), on: clock)
  }

  /// The loop guard's delay. A stopped flight's sleep ends early; its report is then stale
  /// and ignored.
  @inline(never)
  private func backOff(_ key: AccountKey, until: Duration, delay: Duration) async {
    broadcaster.emit(.refreshLoopBackedOff(key: key, delay: delay))
    try? await clock.sleepUntil(until)
  }

  /// The back-off before a retry. A stopped flight's sleep ends early; its report is then
  /// stale and ignored.
  @inline(never)
  private func awaitRetry(
    _ key: AccountKey, flight id: UInt64, until: Duration, attempt: Int, delay: Duration,
    code: AuthCoordinatorError.Code
  ) async {
    broadcaster.emit(
      .retryScheduled(key: key, flight: id, attempt: attempt, delay: delay, code: code))
    try? await clock.sleepUntil(until)
  }

  /// Calls the authorizer.
  @inline(never)
  private func authorize(_ request: AuthorizationRequest?) async -> KeyMachine.StepOutcome {
    guard let request else {
      preconditionFailure("Internal inconsistency: an authorization without its request")
    }
    do {
      return .authorized(.success(try await authorizer.authorize(request)))
    } catch {
      return .authorized(.failure(Self.wrap(error)))
    }
  }

  /// Stores the flight's model; one whose save failed is kept in `unsaved`.
  @inline(never)
  private func persist(
    _ model: AuthModel, _ key: AccountKey, flight id: UInt64, turn: StoreTurn,
    under held: HeldLease, unsaved: inout AuthModel?
  ) async -> KeyMachine.StepOutcome {
    switch await save(model, for: key, turn: turn, under: held, flight: id) {
    case .saved: return .saved
    case .signedOut: return .signedOutElsewhere
    case .leaseLost: return .leaseLost
    case .failed(let error):
      unsaved = model
      reportUnsaved(key, flight: id, error)
      return .saveFailed(model)
    }
  }

  /// Stores a stopped refresh's late result; one whose save failed is kept in `unsaved`.
  @inline(never)
  private func persistLateResult(
    _ model: AuthModel, _ key: AccountKey, flight id: UInt64, turn: StoreTurn,
    under held: HeldLease, unsaved: inout AuthModel?
  ) async -> KeyMachine.StepOutcome {
    switch await save(model, for: key, turn: turn, under: held, flight: id) {
    case .saved: return .lateResultSaved(model)
    case .signedOut, .leaseLost: return .lateResultSaved(nil)
    case .failed(let error):
      unsaved = model
      reportUnsaved(key, flight: id, error)
      return .lateResultUnsaved(model)
    }
  }

  /// Gives the lease back, if the flight holds it (and has not given it up already); with a
  /// back-off, the lease keeps every process off the key until it ends.
  @inline(never)
  private func release(
    _ held: HeldLease, _ key: AccountKey, backingOff backOff: LeaseBackOff? = nil
  ) async {
    guard let grant = held.grant else { return }
    held.grant = nil
    held.renewal?.cancel()
    // A grant the renewal gave up at the maximum hold was released then. A lost one is released
    // all the same: it may only have lapsed, with no one taking it over yet, and a release is
    // idempotent and fenced (it never touches a successor's grant).
    guard held.hold?.wasGivenUp != true, let lease else { return }
    do {
      if let backOff {
        try await lease.release(grant, backingOff: backOff)
      } else {
        try await lease.release(grant)
      }
    } catch { reportStoreFailure(key, .lease, error) }
  }

  /// Tries the lease, after the store operations issued before it (a logout's revocation of
  /// the user's grants among them: a grant taken before that revocation would be void at
  /// once); while held, it is renewed (``LeaseHold``) until released, lost, or held for the
  /// maximum hold.
  @inline(never)
  private func acquireLease(
    _ key: AccountKey, flight id: UInt64, turn: StoreTurn, into held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    turn.done.open()
    return .leaseAttempted(await acquireLease(key, flight: id, into: held))
  }

  private func acquireLease(
    _ key: AccountKey, flight id: UInt64, into held: HeldLease
  ) async -> KeyMachine.LeaseOutcome {
    guard let lease else { return .acquired }
    held.seenVersion = leaseWatch.version
    let ttl = configuration.leaseTimeToLive
    // The grant counts from when it was asked for: an answer that came back late (a pause, a
    // slow database) has less of its time to live left, or none.
    let sent = clock.now()
    do {
      switch try await lease.acquire(key, owner: leaseOwner, timeToLive: ttl) {
      case .acquired(let grant):
        held.grant = grant
        let hold = LeaseHold(at: sent, timeToLive: ttl)
        held.hold = hold
        held.renewal = Task { [weak self] in
          await self?.renew(grant, of: lease, flight: id, hold: hold, since: sent)
        }
        // A read made with the grant is what a token request may spend only while the grant
        // is known to be this flight's for a while yet; otherwise the flight confirms it
        // (reads again, then renews) first.
        guard case .read(let model) = grant.storeRead, hold.isHeld(for: ttl / 3, at: clock.now())
        else { return .acquired }
        return .acquiredWithRead(model)
      case .heldElsewhere(_, let until):
        return .heldElsewhere(until: until)
      case .backingOff(let until, let failures, let code):
        return .backingOff(until: until, failures: failures, code: code)
      }
    } catch {
      reportStoreFailure(key, .lease, error)
      return .failed(
        AuthCoordinatorError(
          .storeFailed, "the cross-process lease could not be taken", underlying: error))
    }
  }

  /// What became of a save.
  enum SaveResult {
    case saved
    /// The store refused or failed: the model is not durable.
    case failed(any Error)
    /// Not made (or undone): the user signed out since the lease was taken.
    case signedOut
    /// Not made: the flight no longer holds the lease, whose next holder may have stored a
    /// newer model.
    case leaseLost
  }

  /// Saves `model` in its turn, unless the user signed out in another process since the lease
  /// was taken or the flight lost its lease; a sign-out that lands during the save is undone at
  /// once (and announced again).
  func save(
    _ model: AuthModel, for key: AccountKey, turn: StoreTurn, under held: HeldLease,
    flight id: UInt64
  ) async -> SaveResult {
    await turn.waitForTurn()
    defer { turn.done.open() }
    let grant = held.grant
    // The renewal first, the sign-out check last before the write: a renewal that came back
    // late (a pause) must not leave a sign-out made meanwhile unseen.
    guard await stillHolds(held, flight: id) else { return .leaseLost }
    guard await isCurrent(grant) else { return .signedOut }
    do {
      // A store that takes part in the fencing refuses the save atomically if a later holder
      // saved first; for any other, the renewal just made is the check.
      if let grant, let fenced = store as? any FencedTokenStore {
        guard try await fenced.save(model, for: key, fence: grant.fence) else {
          if let hold = held.hold { lost(hold, key, flight: id) }
          return .leaseLost
        }
      } else {
        try await store.save(model, for: key)
      }
    } catch {
      reportStoreFailure(key, .save, error)
      return .failed(error)
    }
    guard await isCurrent(grant) else {
      await removeAndAnnounce(.logout(mcUid: key.account))
      return .signedOut
    }
    return .saved
  }

  /// Whether no sign-out of the grant's user happened since it was taken (in doubt, yes).
  private func isCurrent(_ grant: LeaseGrant?) async -> Bool {
    guard let grant, let lease else { return true }
    do { return try await lease.isCurrent(grant) } catch {
      reportStoreFailure(grant.key, .lease, error)
      return true
    }
  }

  /// The flight's task ended: if it was a stopped refresh, the flights waiting for it go on.
  private func workFinished(_ key: AccountKey, _ effects: Flight) {
    let stripe = table.stripe(for: key)
    stripe.lock.withLock { effects.finished }?.open()
  }

  /// Reports a step's outcome to the machine and carries out its answer.
  ///
  /// Out of line, for the flight's frame: see ``runFlight(_:flight:effects:first:)``.
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
        id, outcome, date: date, now: now, removalFailed: stripe.unremoved.covers(key.mcUid))
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
      stripe.lock.unlock()
      carryOut(closing)
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
    var prepared = FlightStep(kind: step.kind)
    switch step.kind {
    case .load, .confirmLease, .acquireLease, .persist, .persistLateResult:
      prepared.turn = stripe.storeOperations.reserve(key)
    case .awaitPredecessors:
      if let machine = stripe.accounts[key]?.machine {
        prepared.predecessors = machine.predecessors.compactMap {
          machine.effects(ofStopped: $0)?.finished
        }
      }
    case .backOff:
      stripe.counters.update { $0.refreshLoopBackoffs += 1 }
    case .awaitRetry:
      stripe.counters.update { $0.retriesScheduled += 1 }
    case .authorize(let reason, let replacing):
      stripe.counters.update { $0.authorizationsStarted += 1 }
      prepared.request = AuthorizationRequest(
        key: key, reason: reason, requestID: nil, replacing: replacing,
        // A refresh ahead runs without a caller: it never involves the user.
        allowsInteraction: configuration.allowsInteraction && reason != .refreshAhead,
        exchangeBegan: { [weak self] in self?.exchangeBegan(key, flight: id) },
        serverClock: serverClock)
    case .awaitLeaseHolder, .releaseLease, .releaseLeaseBackingOff:
      break
    }
    return prepared
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
