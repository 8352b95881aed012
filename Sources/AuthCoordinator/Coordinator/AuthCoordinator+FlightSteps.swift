import Foundation
import SyncPrimitives

// The steps of a flight, each carried out by a function of its own and kept out of line (the
// flight's task, `+FlightRunner`, holds only the frame of the step that runs): read the store,
// confirm the lease (rule 16's guard), wait for stopped refreshes or for the lease's holder,
// back off, authorize, persist, take and give back the lease. Each reports one outcome to the
// state machine; none decides what comes next.
extension AuthCoordinator {
  /// Reads the store in its turn, and reports what it read; a failure is reported and reads as
  /// nothing stored.
  ///
  /// Like the other steps of every cold flight (the authorization and the save), it reports
  /// its own outcome (``advance(_:_:)``) and returns the next step: the frames under it are
  /// only as deep as the read, and a task keeps the allocator's slabs its deepest step needed
  /// for as long as it lives.
  @inline(never)
  func loadStep(_ call: StepCall) async -> FlightStep? {
    let turn = call.step.storeTurn
    await turn.waitForTurn()
    var model: AuthModel?
    do { model = try await store.model(for: call.key) } catch {
      reportStoreFailure(call.key, .load, error)
    }
    turn.finish()
    return loaded(call, model)
  }

  @inline(never)
  private func loaded(_ call: StepCall, _ model: AuthModel?) -> FlightStep? {
    advance(call, .loaded(model))
  }

  /// Rule 16's guard before a token request: the store is read, then the grant renewed. A
  /// renewal that succeeds after the read proves no other process held the lease since it was
  /// taken, so what was read is what the next token request may spend, and a whole time to live
  /// lies ahead. A grant lost or given up reads as lost; a renewal that cannot be made (the
  /// lease's storage failed) confirms the grant only while it is known to stay this flight's
  /// for a third of its time to live.
  @inline(never)
  func confirmLease(
    _ key: AccountKey, flight id: UInt64, turn: StoreTurn, held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    defer { turn.finish() }
    var model: AuthModel?
    do { model = try await store.model(for: key) } catch {
      reportStoreFailure(key, .load, error)
    }
    if PlantedBug.planted == .retryWithoutConfirm { return .loaded(model) }
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
      hold.renewed(sentAt: sent)
    } catch {
      reportStoreFailure(key, .lease, error)
    }
    guard hold.confirms(at: clock.now()) else {
      // Too near its lapse, or in doubt and near it: no token request. The grant is given up
      // and the flight takes the lease again.
      await release(held, key)
      return .leaseLost
    }
    return .loaded(model)
  }

  /// Rule 16's guard, run again for the authorizer before a second token request in one
  /// authorization (``AuthorizationRequest/confirmAnotherTokenRequest()``): the grant is
  /// renewed, and enough of it must be left for a token request, as in ``confirmLease``; and
  /// no sign-out of the user may have come since it was taken (a renewal does not say: rule 19).
  ///
  /// - Throws: ``AuthCoordinatorError/leaseLost(_:)`` when the grant is not held, or
  ///   ``AuthCoordinatorError/signedOut(_:)`` when the user signed out since it was taken.
  func confirmAnotherTokenRequest(
    _ key: AccountKey, flight id: UInt64, grant: LeaseGrant, hold: LeaseHold
  ) async throws {
    guard let lease else { return }
    guard hold.isHeld else { throw AuthCoordinatorError.leaseLost(key) }
    // First, so that the renewal and the margin below are measured after its answer, however
    // long that took (fleet simulation, seed 0x17f7: a check that hung 29 s). In doubt,
    // current: the save's own checks decide, as before the first request.
    guard await isCurrent(grant) else { throw AuthCoordinatorError.signedOut(key) }
    let sent = clock.now()
    do {
      guard try await lease.renew(grant, timeToLive: configuration.leaseTimeToLive) != nil else {
        lost(hold, key, flight: id)
        throw AuthCoordinatorError.leaseLost(key)
      }
      hold.renewed(sentAt: sent)
    } catch let error as AuthCoordinatorError {
      throw error
    } catch {
      reportStoreFailure(key, .lease, error)
    }
    guard hold.confirms(at: clock.now()) else { throw AuthCoordinatorError.leaseLost(key) }
  }

  /// Waits until every stopped refresh the key waits for has finished.
  @inline(never)
  func awaitAll(_ latches: [Latch]) async {
    for latch in latches { await latch.wait() }
  }

  /// Until the holder announces a change, or its lease lapses (then it is taken over).
  @inline(never)
  func awaitLeaseHolder(for wait: Duration, after version: UInt64) async {
    await leaseWatch.wait(after: version, until: clock.deadline(after: wait), on: clock)
  }

  /// The loop guard's delay. A stopped flight's sleep ends early; its report is then stale
  /// and ignored.
  @inline(never)
  func backOff(_ key: AccountKey, until: Duration, delay: Duration) async {
    broadcaster.emit(.refreshLoopBackedOff(key: key, delay: delay))
    try? await clock.sleepUntil(until)
  }

  /// The back-off before a retry. A stopped flight's sleep ends early; its report is then
  /// stale and ignored.
  @inline(never)
  func awaitRetry(
    _ key: AccountKey, flight id: UInt64, until: Duration, attempt: Int, delay: Duration,
    code: AuthCoordinatorError.Code
  ) async {
    broadcaster.emit(
      .retryScheduled(key: key, flight: id, attempt: attempt, delay: delay, code: code))
    try? await clock.sleepUntil(until)
  }

  /// Stores the flight's model, or a stopped refresh's late result, and reports the save; the
  /// machine has one whose save failed retried. It reports its own outcome, as
  /// ``loadStep(_:)`` does and for the same reason.
  @inline(never)
  func persistStep(_ call: StepCall) async -> FlightStep? {
    let (model, late) = call.step.modelToSave
    let held = call.effects.lease
    // Without a grant, straight to the save that needs none: the step before this one in the
    // task's allocation slabs is the flight's loop, and the two fit in the first slab together.
    // The grant is not read here: reading it copies it (144 bytes) into this frame, once per use.
    let result =
      if held.holdsGrant {
        await save(
          model, for: call.key, turn: call.step.storeTurn, under: held, flight: call.flight)
      } else {
        await saveWithoutGrant(model, for: call.key, turn: call.step.storeTurn)
      }
    return persisted(call, result, model, late: late)
  }

  @inline(never)
  private func persisted(
    _ call: StepCall, _ result: SaveResult, _ model: AuthModel, late: Bool
  ) -> FlightStep? {
    advance(
      call,
      persisted(result, model, call.key, flight: call.flight, under: call.effects.lease, late: late)
    )
  }

  /// What a save of the flight's model (or of a stopped refresh's late result) reports. Out
  /// of line, so that the saving steps' frames hold only the save's result.
  @inline(never)
  private func persisted(
    _ result: SaveResult, _ model: AuthModel, _ key: AccountKey, flight id: UInt64,
    under held: HeldLease, late: Bool
  ) -> KeyMachine.StepOutcome {
    switch result {
    case .saved: return late ? .lateResultSaved(model) : .saved
    case .signedOut: return late ? .lateResultSignedOut : .signedOutElsewhere
    case .leaseLost: return late ? .lateResultSaved(nil) : .leaseLost
    case .failed(let error):
      reportUnsaved(key, flight: id, error)
      return late
        ? .lateResultUnsaved(model, obtainedUnder: held.grant)
        : .saveFailed(model, obtainedUnder: held.grant)
    }
  }

  /// Gives the lease back, if the flight holds it (and has not given it up already); with a
  /// back-off, the lease keeps every process off the key until it ends.
  ///
  /// Every flight's task calls it as it ends, most holding nothing. The release's work is in a
  /// function of its own: with it in this one, the frame (1,360 bytes) was larger than a slab
  /// of the task's allocator, and every flight's end took a 2-3 KB block for it. This frame
  /// fits in a slab the task already holds.
  @inline(never)
  func release(
    _ held: HeldLease, _ key: AccountKey, backingOff backOff: LeaseBackOff? = nil
  ) async {
    guard let grant = held.grant else { return }
    await release(grant, of: held, key, backingOff: backOff)
  }

  @inline(never)
  private func release(
    _ grant: LeaseGrant, of held: HeldLease, _ key: AccountKey, backingOff backOff: LeaseBackOff?
  ) async {
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
  func acquireLease(
    _ key: AccountKey, flight id: UInt64, turn: StoreTurn, into held: HeldLease
  ) async -> KeyMachine.StepOutcome {
    await turn.waitForTurn()
    turn.finish()
    return .leaseAttempted(await acquireLease(key, flight: id, into: held))
  }

  func acquireLease(
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
        let hold = LeaseHold(grantedAt: sent, timeToLive: ttl, maximumHold: policy.maximumHold)
        held.hold = hold
        held.renewal = Task { [weak self] in
          await self?.renew(grant, of: lease, flight: id, hold: hold)
        }
        // A read made with the grant is what a token request may spend only while the grant
        // is known to be this flight's for a while yet; otherwise the flight confirms it
        // (reads again, then renews) first.
        guard case .read(let model) = grant.storeRead, hold.confirms(at: clock.now())
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
  ///
  /// - Parameter retry: Whether an earlier attempt may have written `model` (rule 21's retry):
  ///   a sign-out found now removes that write, and in doubt (the store cannot be read) too.
  ///
  /// Out of line: the grant it unwraps takes room in its frame, not in its callers' frames.
  @inline(never)
  func save(
    _ model: AuthModel, for key: AccountKey, turn: StoreTurn, under held: HeldLease,
    flight id: UInt64, retry: Bool = false, confirmingGrant: Bool = false
  ) async -> SaveResult {
    guard let grant = held.grant else { return await saveWithoutGrant(model, for: key, turn: turn) }
    return await save(
      model, for: key, turn: turn, under: held, grant: grant, flight: id, retry: retry,
      confirmingGrant: confirmingGrant)
  }

  /// A save by a flight that holds no grant (the coordinator has no lease, or the flight gave
  /// its grant back): no renewal and no check of the lease to make, before or after the write.
  /// What ``save(_:for:turn:under:grant:flight:retry:confirmingGrant:)`` would do with no
  /// grant, in a frame of its own a fraction of that one's size.
  @inline(never)
  private func saveWithoutGrant(
    _ model: AuthModel, for key: AccountKey, turn: StoreTurn
  ) async -> SaveResult {
    await turn.waitForTurn()
    defer { turn.finish() }
    do { try await store.save(model, for: key) } catch {
      reportStoreFailure(key, .save, error)
      return .failed(error)
    }
    return .saved
  }

  /// A save under the lease's `grant`.
  @inline(never)
  private func save(
    _ model: AuthModel, for key: AccountKey, turn: StoreTurn, under held: HeldLease,
    grant: LeaseGrant, flight id: UInt64, retry: Bool, confirmingGrant: Bool
  ) async -> SaveResult {
    await turn.waitForTurn()
    defer { turn.finish() }
    // The renewal first, the sign-out check last before the write: a renewal that came back
    // late (a pause) must not leave a sign-out made meanwhile unseen.
    guard await stillHolds(held, flight: id) else {
      // A retry whose hold lapsed saves nothing, but an earlier attempt may have written after
      // a sign-out elsewhere, with checks after the write that failed: the lease decides
      // before the retry ends.
      guard retry else { return .leaseLost }
      switch await settleEarlierWrite(of: model, for: key, grant: grant) {
      case .stands: return .leaseLost
      case .undone: return .signedOut
      case .unknown(let error): return .failed(error)
      }
    }
    // A retry whose model memory forgot on a sign-out announced elsewhere writes only on the
    // lease's answer: in doubt, the model may be the signed-out session's (seed 0xf382c).
    let current: Bool
    if confirmingGrant {
      switch await checkAfterWrite(grant) {
      case .current: current = true
      case .notCurrent: current = false
      case .unknown(let error): return .failed(error)
      }
    } else {
      current = await isCurrent(grant)
    }
    guard current else {
      // A retry of a write whose check could not be made: that write is undone now. A first
      // attempt wrote nothing: what the store holds is not this flight's.
      guard retry else { return .signedOut }
      await undoWrite(of: model, for: key)
      return .signedOut
    }
    do {
      // A store that takes part in the fencing refuses the save atomically if a later holder
      // saved first; for any other, the renewal just made is the check.
      if let fenced = store as? any FencedTokenStore {
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
    // The write is the store work: a logout's removal may follow it now, while the check runs
    // (a lease that hangs here must not hold the logout back). A sign-out found after the write
    // still undoes it.
    turn.storeWorkFinished()
    switch await checkAfterWrite(grant) {
    case .current:
      return .saved
    case .notCurrent:
      // Only where the store still holds this write: the answer may come late (a slow lease,
      // the check tried again), after a logout removed the write and a new session stored its
      // own model, which a removal of the user's models would take out of the store, with an
      // announced sign-out nobody made (randomized stress with lease faults, 2026-12-07).
      await undoWrite(of: model, for: key)
      return .signedOut
    case .unknown(let error):
      // Not "in doubt, yes": a sign-out during the write would stay undone for good (fleet
      // simulation, seed 0x50e). The model counts as unsaved, served and kept (rule 21); its
      // save is retried, and the retry's own checks decide: a sign-out found then removes it.
      return .failed(error)
    }
  }

  /// Removes an earlier write of `model` made after a sign-out elsewhere (``undoSave(of:)``),
  /// if the store still holds it. Compared by its tokens: a store may not keep every field bit
  /// for bit (a database's timestamps). What the store holds otherwise is not this write's.
  func undoWrite(of model: AuthModel, for key: AccountKey) async {
    do {
      let stored = try await store.model(for: key)
      guard let stored, stored.accessToken == model.accessToken,
        stored.refreshToken == model.refreshToken
      else { return }
    } catch {
      // In doubt, undone: the signed-out session must not stay in the store for good.
      reportStoreFailure(key, .load, error)
    }
    await undoSave(of: key)
  }

  /// What the lease says of a grant after its write.
  enum GrantCheck {
    case current
    case notCurrent
    /// The lease could not be read, three times in a row.
    case unknown(any Error)
  }

  /// Asks the lease whether `grant` is current after a write, three times at most while it
  /// cannot answer (each failure reported).
  func checkAfterWrite(_ grant: LeaseGrant?) async -> GrantCheck {
    guard let grant, let lease else { return .current }
    var failure: any Error = CancellationError()
    for _ in 0..<3 {
      do { return try await lease.isCurrent(grant) ? .current : .notCurrent } catch {
        reportStoreFailure(grant.key, .lease, error)
        failure = error
      }
    }
    return .unknown(failure)
  }

  /// Whether no sign-out of the grant's user happened since it was taken (in doubt, yes).
  func isCurrent(_ grant: LeaseGrant?) async -> Bool {
    guard let grant, let lease else { return true }
    do { return try await lease.isCurrent(grant) } catch {
      reportStoreFailure(grant.key, .lease, error)
      return true
    }
  }
}
