import Foundation

// The events from outside a flight's steps: its authorizer entering the exchange, a deadline
// passing, its last waiter leaving, the account signing out. Each may stop the flight; every
// ending still passes through `finish` (+StoppedFlights).
extension AccountStateMachine {
  /// The authorizer of flight `id` entered its exchange at `now`.
  ///
  /// - Returns: The exchange's deadline, or `nil` if the event is stale or the authorizer is
  ///   not interactive (its authorization deadline bounds the exchange too).
  mutating func exchangeBegan(_ id: UInt64, now: Duration) -> Duration? {
    guard policy.interactiveAuthorizer, case .authorizing(var authorizing) = state,
      authorizing.id == id,
      !authorizing.exchangeBegan
    else { return nil }
    authorizing.exchangeBegan = true
    state = .authorizing(authorizing)
    return CoordinatorClock.deadline(after: policy.exchangeTimeout, from: now)
  }

  /// The authorizer of flight `id` turned to the user (``AuthorizationRequest/interact(_:)``).
  /// A stale event, or one from an authorizer that does not announce interaction, changes
  /// nothing.
  mutating func interactionBegan(_ id: UInt64) {
    guard policy.announcesInteraction, case .authorizing(var authorizing) = state,
      authorizing.id == id
    else { return }
    authorizing.interactionBegan = true
    state = .authorizing(authorizing)
  }

  /// A deadline of flight `id` for `phase` passed.
  ///
  /// Each phase that waits on something outside has one: the store load, the authorization,
  /// the exchange, the save. A deadline of a phase the flight has left does nothing, and the
  /// authorization deadline no longer applies once the exchange began (the exchange has its own).
  ///
  /// - Parameter deadline: The instant the deadline was armed for: a re-read is bounded by its
  ///   own, not by the deadline of an earlier read of the same flight. `nil` matches any.
  /// Whether a deadline of flight `id` still concerns this machine: the flight is the current
  /// one, or (for a deadline that `abandons`) a stopped refresh. Any other deadline is of a
  /// flight that ended or left that phase, and ``deadlineReached(_:phase:date:at:)`` and
  /// ``abandon(_:)`` change nothing for it.
  func hasLiveDeadline(of id: UInt64, abandons: Bool) -> Bool {
    abandons ? isStoppedRefresh(id) : flightID == id
  }

  mutating func deadlineReached(
    _ id: UInt64, phase: AuthEvent.FlightPhase, date: Date, at deadline: Duration? = nil
  ) -> Ending? {
    guard flightID == id else { return nil }
    return expired(id, phase: phase, date: date, at: deadline).map { finish($0) }
  }

  private mutating func expired(
    _ id: UInt64, phase: AuthEvent.FlightPhase, date: Date, at deadline: Duration?
  ) -> Ending? {
    switch (phase, state) {
    case (.authorization, .authorizing(let authorizing)) where authorizing.exchangeBegan:
      return nil
    case (.authorization, .authorizing(let authorizing)),
      (.exchange, .authorizing(let authorizing)):
      state = .idle
      let limit = phase == .authorization ? policy.authorizationTimeout : policy.exchangeTimeout
      return stopped(
        authorizing,
        Ending(
          flight: id,
          result: .timedOut(
            phase,
            AuthCoordinatorError.timedOut("the \(phase.rawValue) did not finish within \(limit)"))
        ))
    case (.authorization, .preparing(let preparing)) where preparing.authorizationDeadlineArmed:
      state = .idle
      let waited =
        preparing.stage == .awaitingHolder ? "another process's authorization" : "the authorization"
      return Ending(
        flight: id,
        result: .timedOut(
          .authorization,
          AuthCoordinatorError.timedOut(
            "\(waited) did not finish within \(policy.authorizationTimeout)")
        ))
    case (.load, .preparing(let preparing))
    where preparing.stage.reads && (deadline == nil || deadline == preparing.readDeadline):
      state = .idle
      let unanswered =
        preparing.stage == .askingAboutUnsaved
        ? "the cross-process lease did not say whether the user signed out"
        : "the token store did not answer the re-read"
      return Ending(
        flight: id,
        result: .timedOut(
          .load, AuthCoordinatorError(.storeFailed, "\(unanswered) within \(policy.storeTimeout)")),
        storeTimedOut: .load)
    case (.load, .loading):
      // The cache stays unknown: the next request reads the store again. Nothing is
      // authorized: a stuck store is no reason to send the user to authorize.
      state = .idle
      return Ending(
        flight: id,
        result: .timedOut(
          .load,
          AuthCoordinatorError(
            .storeFailed, "the token store did not answer the load within \(policy.storeTimeout)")),
        storeTimedOut: .load)
    case (.save, .releasing(let ending))
    where confirmingGrant == id && (deadline == nil || deadline == confirmDeadline):
      return confirmationTimedOut(ending)
    case (_, .releasing(let ending)):
      // Asking the lease whether its grant outlives an announced sign-out: the callers wait
      // for the answer, bounded by the question's own deadline (above).
      guard confirmingGrant != id else { return nil }
      // Any deadline still armed for the flight: its callers get the result at once; the
      // lease goes back in the background.
      state = .idle
      return ending
    case (.save, .persisting(let flight, _, _)) where signOutCheck?.flight == flight:
      // A sign-out was announced and the lease has not said yet whether this flight's grant
      // predates it: the model may be the signed-out session's. The waiters wait for the save,
      // which checks the grant itself, or for the answer.
      return nil
    case (.save, .persisting(_, let model, _)) where Self.expired(model, at: date):
      // The model expired while the flight paused and saved: it is never served. The waiters
      // wait for the save (their own deadlines bound it), which goes on: it stores the
      // rotated refresh token.
      return nil
    case (.save, .persisting(_, let model, _)):
      // Rule 10: the waiters get the model and it is cached; the save goes on.
      adopt(model, obtainedAt: date)
      savesPastDeadline[id] = model
      state = .idle
      return Ending(flight: id, result: .succeeded(model), storeTimedOut: .save)
    default:
      return nil
    }
  }

  /// Every caller waiting on flight `id` left.
  mutating func lastWaiterLeft(_ id: UInt64) -> LastWaiterAction {
    guard flightID == id else { return .ignore }
    // A flight that already has its model finishes and caches it: the save is under way, and
    // dropping the model would leave the store holding what memory forgot.
    if case .persisting = state { return .keepRunning }
    if case .releasing = state { return .keepRunning }
    // A refresh ahead was started by no caller: the ones that joined it do not own it.
    if reason == .refreshAhead { return .keepRunning }
    // Before authorizing there is nothing to finish: an abandoned lease wait just stops.
    switch policy.whenAbandoned {
    case .finishAndCache: return .keepRunning
    case .cancel: return .closeQueue
    }
  }

  /// The queue of flight `id` was closed after its last waiter left (no one joined
  /// meanwhile): the flight stops.
  mutating func queueClosed(_ id: UInt64) -> Ending {
    guard flightID == id else {
      preconditionFailure("Internal inconsistency: closed the queue of flight \(id), not current")
    }
    let ending = Ending(flight: id, result: .cancelled(.lastWaiterLeft))
    defer { state = .idle }
    if case .authorizing(let authorizing) = state { return finish(stopped(authorizing, ending)) }
    return finish(ending)
  }

  /// The account logged out or unbound: memory forgets the model and the loop-guard history.
  ///
  /// - Returns: How the flight in progress ends, if there is one.
  ///
  /// - Parameter elsewhere: The sign-out happened in another process: memory forgets the model
  ///   but the store is read again (it may already hold the next login's model).
  /// - Returns: How the flight in progress ends, if there is one.
  mutating func signOut(elsewhere: Bool = false) -> Ending? {
    signedOut(elsewhere: elsewhere).map { finish($0) }
  }

  /// What an announcement of a sign-out in another process does to the flight in progress.
  enum SignOutAnnouncement: Equatable {
    /// The flight (if any) was stopped, as ``signOut(elsewhere:)`` does.
    case stopped(Ending?)
    /// The flight holds a lease grant: it goes on until the coordinator has asked the lease
    /// whether that grant is current (``signOutChecked(flight:grantCurrent:)``).
    case checkGrant(flight: UInt64)
  }

  /// Another process announced that the account signed out (rule 19). Memory forgets the
  /// model either way. An announcement may arrive late, after another process's grant of the
  /// key began a newer session: a flight holding a grant may be that session's, and stopping
  /// it would lose the refresh token it is spending (its result would never be stored). So a
  /// flight that holds a grant goes on until the grant was checked; any other stops.
  ///
  /// - Parameters:
  ///   - flightHoldsGrant: The flight in progress holds a lease grant.
  ///   - grant: That grant, which the flight asks about itself if it has its result before
  ///     the answer (``StepKind/confirmGrant(_:)``).
  /// - Returns: Whether the flight stopped, or which one waits for its grant's check.
  mutating func signOutAnnounced(
    flightHoldsGrant: Bool, grant: LeaseGrant? = nil
  ) -> SignOutAnnouncement {
    retriesOutliveAnnouncement()
    guard flightHoldsGrant, let id = flightID else { return .stopped(signOut(elsewhere: true)) }
    if case .model = cache { cache = .unknown }
    loopGuardStarts.removeAll()
    cooldown = nil
    transientFailures = 0
    signOutCheck = (id, nil, grant)
    return .checkGrant(flight: id)
  }

  /// The lease answered whether flight `id`'s grant is current after a sign-out announcement:
  /// a grant taken before the sign-out is not, and its flight stops as ``signOut(elsewhere:)``
  /// stops one; one taken after it belongs to a newer session, which goes on.
  ///
  /// - Parameters:
  ///   - id: The flight ``signOutAnnounced(flightHoldsGrant:)`` named.
  ///   - grantCurrent: Whether the lease says its grant is current (in doubt, `false`: a
  ///     logout is never undone on a guess).
  /// - Returns: How the flight ends, if it is still in progress and its grant is not current.
  mutating func signOutChecked(flight id: UInt64, grantCurrent: Bool) -> Ending? {
    let left = signOutCheck?.flight == id ? signOutCheck?.model : nil
    if signOutCheck?.flight == id { signOutCheck = nil }
    guard !grantCurrent else { return nil }
    // The flight asks the lease itself before serving: its answer ends it (and keeps its save
    // retry, if any).
    if confirmingGrant == id { return nil }
    if flightID == id { return signOut(elsewhere: true) }
    // The flight ended before the answer: the model it left in memory (served, its save
    // failed and retried) is the signed-out session's, and memory forgets it. Anything else
    // (a later flight, its stopped refresh, the model it left) has a grant of its own.
    if let left, case .model(let cached) = cache, cached.model == left { cache = .unknown }
    return nil
  }

  /// The sign-out itself; `decide` ends a save with it too.
  mutating func signedOut(elsewhere: Bool) -> Ending? {
    let id = flightID
    state = .idle
    // A logout here removed the store's models itself: no retry writes again.
    if !elsewhere {
      for retry in saveRetries.keys {
        saveRetries[retry]?.forgottenOnAnnouncement = false
        saveRetries[retry]?.removedHere = true
      }
    }
    cache = elsewhere ? .unknown : .empty
    loopGuardStarts.removeAll()
    cooldown = nil
    transientFailures = 0
    // Results still on their way belong to the signed-out user: never stored.
    for (flight, record) in stopped where record.fate == .refreshing(storesResult: true) {
      stopped[flight]?.fate = .refreshing(storesResult: false)
    }
    guard let id else { return nil }
    let error = AuthCoordinatorError.signedOut(key)
    return Ending(flight: id, result: .cancelled(.signedOut), followers: .fail(error))
  }
}

// Rule 19 at a flight's end: a flight that holds a grant goes on after a sign-out announcement
// until the lease says whether the grant predates it (``signOutAnnounced(flightHoldsGrant:grant:)``).
// If it has its result first, it does not serve it on a guess: it asks the lease itself.
extension AccountStateMachine {
  /// The step that asks the lease about the flight's grant before `ending` is served, when a
  /// sign-out announced while the flight held it is still being checked; `nil` otherwise.
  /// Found by the fleet simulation's long run (seeds 0x4ac70, 0x51836, 0xf0259, 0x167cd): a
  /// flight whose grant check hung, or that resumed from a pause together with the answer,
  /// served the signed-out session's model before the answer stopped it.
  ///
  /// The question has a deadline of its own, the store timeout from `now`: a lease that hangs
  /// does not hold the callers for good (``expired(_:phase:date:at:)``).
  mutating func confirmation(before ending: Ending, now: Duration) -> Step? {
    guard let check = signOutCheck, check.flight == ending.flight, let grant = check.grant,
      confirmingGrant != ending.flight, case .succeeded = ending.result
    else { return nil }
    confirmingGrant = ending.flight
    state = .releasing(ending)
    let deadline = CoordinatorClock.deadline(after: policy.storeTimeout, from: now)
    confirmDeadline = deadline
    return Step(kind: .confirmGrant(grant), deadline: deadline)
  }

  /// The question of ``confirmation(before:now:)`` was not answered by its deadline: in doubt,
  /// not current (a logout is never undone on a guess), and the flight ends as
  /// ``grantConfirmed(_:current:)`` ends it then. Its task, still waiting for the lease, goes
  /// on with the save retry it carries once the answer comes
  /// (``grantConfirmedAfterItsFlight(_:current:now:)``). Found by testing the gap named last
  /// stop: a lease that hung there held every caller without a timeout of its own for good.
  mutating func confirmationTimedOut(_ ending: Ending) -> Ending {
    var ending = ending
    ending.saveRetry = nil
    state = .idle
    return grantConfirmed(&ending, current: false)
  }

  /// The lease answered the flight's own question (``confirmation(before:now:)``): a current grant
  /// serves `ending`; one that predates the sign-out makes the flight end as the sign-out
  /// would have stopped it, and memory forget its model. A save retry the ending carries goes
  /// on: it checks, and undoes, what an earlier attempt may have written.
  mutating func grantConfirmed(_ ending: inout Ending, current: Bool) -> Ending {
    confirmingGrant = nil
    confirmDeadline = nil
    if signOutCheck?.flight == ending.flight { signOutCheck = nil }
    guard !current, case .succeeded(let model) = ending.result else { return ending }
    if case .model(let cached) = cache, cached.model == model { cache = .unknown }
    let error = AuthCoordinatorError.signedOut(key)
    ending.result = .cancelled(.signedOut)
    ending.followers = .fail(error)
    ending.adoptedFromStore = false
    return ending
  }

  /// The lease answered the question of a flight that was stopped while it asked (a logout
  /// here, or an announcement once its lease went back): the answer still decides what memory
  /// keeps, and a grant that predates the sign-out makes memory forget the flight's model if a
  /// read brought it back. A save retry the flight carried goes on from its first wait: it
  /// saves, or checks and undoes, its write. (Before, the answer reached the retry as an
  /// outcome it could not have asked for, and trapped.)
  mutating func grantConfirmedAfterItsFlight(
    _ id: UInt64, current: Bool, now: Duration
  ) -> AdvanceAction {
    let left = signOutCheck?.flight == id ? signOutCheck?.model : nil
    if signOutCheck?.flight == id { signOutCheck = nil }
    if !current, let left { modelSignedOut(left) }
    guard let retry = saveRetries[id] else { return .ignore }
    if current {
      // Memory may have let the model go on the stop (a deadline in doubt): the lease decides
      // before the retry writes, as after an announcement; unless a logout here removed it.
      if !retry.removedHere { saveRetries[id]?.forgottenOnAnnouncement = true }
    } else {
      modelSignedOut(retry.model)
    }
    return .next(awaitSaveRetry(after: retry.delay, now: now))
  }
}
