import Foundation

// What a flight does between deciding to authorize and calling the authorizer: wait for a
// stopped refresh of the key, take the cross-process lease or wait for its holder, and re-read
// the store, adopting what another process stored (Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md).
extension AccountStateMachine {
  /// A flight must authorize: it waits for stopped refreshes of the key, takes the lease, and
  /// re-reads the store first, as far as each applies.
  mutating func beginAuthorization(
    _ id: UInt64, reason: AuthorizationReason, rejecting rejected: Set<String>,
    replacing: AuthModel?, justRead: Bool, now: Duration
  ) -> Step {
    var preparing = Preparing(id: id, reason: reason, rejectedTokens: rejected, stage: .rereading)
    let kind: StepKind
    if replacing?.refreshToken != nil, !predecessors.isEmpty {
      preparing.stage = .awaitingPredecessors
      kind = .awaitPredecessors
    } else if policy.usesLease {
      preparing.stage = .acquiringLease
      kind = .acquireLease
    } else if !justRead {
      kind = .load
    } else {
      return authorize(
        id, reason: reason, replacing: replacing, now: now, deadline: nil, holdsLease: false)
    }
    if kind == .load { return reread(&preparing, now: now) }
    let step = step(kind, now: now)
    preparing.authorizationDeadlineArmed = true
    preparing.authorizationDeadline = step.deadline
    state = .preparing(preparing)
    return step
  }

  /// The next step of a flight preparing to authorize, after `outcome`.
  mutating func prepared(
    _ preparing: Preparing, _ outcome: StepOutcome, date: Date, now: Duration
  ) -> AdvanceAction {
    var preparing = preparing
    switch (preparing.stage, outcome) {
    case (.backingOff, .backedOff):
      // Time has passed: the store is read again (another process may have refreshed).
      return .next(
        beginAuthorization(
          preparing.id, reason: preparing.reason, rejecting: preparing.rejectedTokens,
          replacing: cachedModel, justRead: false, now: now))
    case (.awaitingPredecessors, .predecessorsFinished):
      guard policy.usesLease else { return .next(reread(&preparing, now: now)) }
      preparing.stage = .acquiringLease
      state = .preparing(preparing)
      return .next(Step(kind: .acquireLease, deadline: nil))
    case (.awaitingRetry(let attempt), .backedOff):
      preparing.attempt = attempt
      guard preparing.holdsLease else {
        return .next(
          authorize(
            preparing.id, reason: preparing.reason, replacing: cachedModel, now: now,
            deadline: preparing.authorizationDeadline, holdsLease: false, attempt: attempt,
            rejecting: preparing.rejectedTokens, callerJoined: preparing.callerJoined))
      }
      // Rule 16's guard: the wait may have outlasted the grant (a paused process), and
      // another process may have spent the refresh token meanwhile. The grant is confirmed
      // and the store re-read under it before the token request.
      return .next(reread(&preparing, now: now))
    case (.confirmingLease, .loaded(let model)):
      return reread(preparing, model, date: date, now: now)
    case (.askingAboutUnsaved, .unsavedGrantChecked(let grant, let answer)):
      return unsavedGrantChecked(&preparing, grant, answer, now: now)
    case (.confirmingLease, .leaseLost):
      // Taken over during the wait: take the lease again (or wait for its holder), then read
      // what the holder stored. A lease that loses every grant at once is broken: after a few
      // tries the flight fails instead of spinning until its deadline.
      preparing.holdsLease = false
      // An answer about the unsaved model's grant holds while the grant it was given under is
      // held: a sign-out during the wait would not show in the next grant, so it is asked again.
      preparing.confirmedUnsavedGrant = nil
      preparing.leaseLosses += 1
      guard preparing.leaseLosses <= Self.maxLeaseLosses else {
        state = .idle
        return .end(Ending(flight: preparing.id, result: .failed(.leaseLost(key))))
      }
      preparing.stage = .acquiringLease
      state = .preparing(preparing)
      return .next(Step(kind: .acquireLease, deadline: nil))
    case (.acquiringLease, .leaseAttempted(.acquired)):
      preparing.holdsLease = true
      return .next(reread(&preparing, now: now))
    case (.acquiringLease, .leaseAttempted(.acquiredWithRead(let model))):
      // The lease read the store in the same step that granted it: that is the re-read.
      preparing.holdsLease = true
      return reread(preparing, model, date: date, now: now)
    case (.acquiringLease, .leaseAttempted(.heldElsewhere(let until))):
      preparing.stage = .awaitingHolder
      state = .preparing(preparing)
      let wait = LeaseHolderWait.duration(
        holderExpiresAt: until, now: date, timeToLive: policy.leaseTimeToLive)
      return .next(Step(kind: .awaitLeaseHolder(for: wait), deadline: nil))
    case (.acquiringLease, .leaseAttempted(.backingOff(let until, let failures, let code))):
      return leaseBackingOff(
        preparing, until: until, failures: failures, code: code, date: date, now: now)
    case (.acquiringLease, .leaseAttempted(.failed(let error))):
      state = .idle
      return .end(Ending(flight: preparing.id, result: .failed(error)))
    case (.awaitingHolder, .leaseHolderChanged):
      return .next(reread(&preparing, now: now))
    case (.rereading, .loaded(let model)):
      return reread(preparing, model, date: date, now: now)
    case (.releasing(let model), .leaseReleased):
      state = .idle
      // Rule 10: the release may have outlasted the model's life (a pause).
      guard !Self.expired(model, at: date) else {
        return .end(Ending(flight: preparing.id, result: .failed(expiredBeforeServed())))
      }
      return .end(Ending(flight: preparing.id, result: .succeeded(model), adoptedFromStore: true))
    default:
      preconditionFailure(
        "Internal inconsistency: \(outcome) reported while preparing (\(preparing.stage))")
    }
  }

  /// The most grants a flight may lose between taking the lease and confirming it.
  static var maxLeaseLosses: Int { 3 }

  /// The step that re-reads the store, bounded by a store deadline of its own.
  /// Under the lease it is rule 16's guard (``StepKind/confirmLease``): the grant is renewed
  /// in the same step, so the token request that may follow starts with a whole time to live
  /// ahead, whatever waits came before (a slow read, a paused process).
  mutating func reread(_ preparing: inout Preparing, now: Duration) -> Step {
    let step = step(preparing.holdsLease ? .confirmLease : .load, now: now)
    preparing.stage =
      preparing.holdsLease ? .confirmingLease(attempt: preparing.attempt) : .rereading
    preparing.readDeadline = step.deadline
    state = .preparing(preparing)
    return step
  }

  /// The store was read before authorizing: a valid model the callers did not reject is
  /// adopted (another process, or a stopped flight, obtained it); otherwise the flight
  /// authorizes, once it holds the lease when there is one.
  mutating func reread(
    _ preparing: Preparing, _ model: AuthModel?, date: Date, now: Duration
  ) -> AdvanceAction {
    var preparing = preparing
    // The store is the shared truth: memory follows it (a model this process cached keeps its
    // leeway and history), unless memory holds a newer model whose save failed (rule 21).
    let model = preferred(overStored: model)
    if preparing.holdsLease, let grant = unsavedGrant(of: model),
      grant != preparing.confirmedUnsavedGrant
    {
      // Rule 19 before rule 21: unless the lease says no sign-out came since.
      preparing.stage = .askingAboutUnsaved
      let step = step(.checkUnsavedGrant(grant), now: now)
      preparing.readDeadline = step.deadline
      state = .preparing(preparing)
      return .next(step)
    }
    if model != cachedModel {
      cache = model.map { .model(cached($0, from: date)) } ?? .empty
    }
    if let model, model.isValid(at: date, leeway: policy.refreshLeeway),
      !preparing.rejectedTokens.contains(model.accessToken)
    {
      recovered()
      // Read under a grant whose sign-out check is pending: an answer that the grant predates
      // the sign-out, arriving after the flight ended, makes memory forget this model.
      if signOutCheck?.flight == preparing.id { signOutCheck?.model = model }
      guard preparing.holdsLease else {
        state = .idle
        return .end(
          Ending(flight: preparing.id, result: .succeeded(model), adoptedFromStore: true))
      }
      preparing.stage = .releasing(model)
      state = .preparing(preparing)
      return .next(Step(kind: .releaseLease, deadline: nil))
    }
    if preparing.deposed {
      // Its own result was refused or not stored, and the store holds nothing to serve: a
      // clear error, never a second token request with a refresh token it spent.
      state = .idle
      return .end(Ending(flight: preparing.id, result: .failed(.leaseLost(key))))
    }
    if policy.usesLease, !preparing.holdsLease {
      preparing.stage = .acquiringLease
      state = .preparing(preparing)
      return .next(Step(kind: .acquireLease, deadline: nil))
    }
    return .next(
      authorize(
        preparing.id, reason: preparing.reason, replacing: model, now: now,
        deadline: preparing.authorizationDeadline, holdsLease: preparing.holdsLease,
        attempt: preparing.attempt, rejecting: preparing.rejectedTokens,
        callerJoined: preparing.callerJoined))
  }

  /// The flight's save was refused by the fence, or not made, because it lost the lease after
  /// its authorizer answered: the next holder may have stored a newer model, and the flight's
  /// own one belongs to a refresh token family the store may not hold. It reads the store and
  /// serves what it holds; its own result is neither served nor cached.
  mutating func deposed(_ id: UInt64, now: Duration) -> Step {
    var preparing = Preparing(
      id: id, reason: .expired, rejectedTokens: persistingRejections, stage: .rereading)
    preparing.deposed = true
    return reread(&preparing, now: now)
  }

  /// Calls the authorizer (attempt `attempt`), under the flight's authorization `deadline`, or
  /// under one armed now when there is none yet.
  mutating func authorize(
    _ id: UInt64, reason: AuthorizationReason, replacing: AuthModel?, now: Duration,
    deadline: Duration?, holdsLease: Bool, attempt: Int = 1, rejecting rejected: Set<String> = [],
    callerJoined: Bool = false
  ) -> Step {
    // The model being replaced is older than anything the authorization brings, whether its
    // refresh token is handed over or was refused before (rule 21's preference).
    if let token = replacing?.refreshToken { noteReplaced(refreshToken: token) }
    // A refresh token the server refused is never handed to the authorizer again.
    let replacing = replacing.map(withoutRefusedRefreshToken)
    let kind = StepKind.authorize(reason, replacing: replacing)
    let step = deadline == nil ? step(kind, now: now) : Step(kind: kind, deadline: nil)
    state = .authorizing(
      Authorizing(
        id: id, reason: reason, spendsRefreshToken: replacing?.refreshToken != nil,
        startedAt: now, holdsLease: holdsLease, attempt: attempt,
        deadline: deadline ?? step.deadline, rejectedTokens: rejected,
        callerJoined: callerJoined, spentRefreshToken: replacing?.refreshToken))
    return step
  }
}
