import Foundation

// The vocabulary of the state machine: its policy, the steps of a flight, and the actions its
// events return. Every decision the coordinator carries out is one of these values.
extension AccountStateMachine {
  /// The limits the machine enforces.
  struct Policy: Equatable {
    var refreshLeeway: TimeInterval
    var maxForcedAuthorizations: Int
    var loopWindow: Duration
    /// The first delay of a non-interactive authorizer's authorization beyond the loop limit.
    var loopBackoff: Duration = .seconds(1)
    /// The longest such delay.
    var maxLoopBackoff: Duration = .seconds(30)
    /// The authorizer may involve the user: the loop guard refuses instead of delaying, and
    /// the exchange has its own deadline.
    var interactiveAuthorizer = true
    /// The authorizer tries without the user first and says when it turns to them
    /// (``Authorizer/announcesInteraction``): until then, a flight fails as a silent one.
    var announcesInteraction = false
    /// The coordinator lets its authorizer involve the user
    /// (``AuthCoordinator/Configuration/allowsInteraction``).
    var allowsInteraction = true
    var whenAbandoned: AuthCoordinator.AbandonPolicy
    var authorizationTimeout: Duration = .seconds(300)
    var exchangeTimeout: Duration = .seconds(30)
    /// Already the smaller of the store and authorization timeouts.
    var storeTimeout: Duration = .seconds(10)
    /// The first wait before a failed save is retried, doubled after each failure up to
    /// ``maxSaveRetryDelay`` (the configuration's).
    var saveRetryDelay: Duration = .seconds(1)
    var maxSaveRetryDelay: Duration = .seconds(30)
    /// Flights take a cross-process lease before they authorize.
    var usesLease = false
    /// The longest a flight holds the lease, and the longest a stopped refresh keeps later
    /// flights waiting (``AuthCoordinator/Configuration/maximumHold``, resolved).
    var maximumHold: Duration = .seconds(400)
    /// The lease's time to live (``AuthCoordinator/Configuration/leaseTimeToLive``): it bounds
    /// a wait for another process's holder (``LeaseHolderWait``).
    var leaseTimeToLive: Duration = .seconds(15)
    /// Refresh ahead, retries, remembered failures, stale-if-error (resolved: the
    /// configuration's, or the authorizer's own, or ``SilentRefreshPolicy/disabled``).
    var silent: SilentRefreshPolicy = .disabled
  }

  /// What a flight does next. Each kind is one phase; the flight runner carries out one step
  /// at a time and reports its ``StepOutcome``.
  enum StepKind: Equatable {
    /// Read the store (a cold start, or the re-read before authorizing).
    case load
    /// Wait until the key's stopped flights whose refresh is still running have finished (and
    /// stored what they got).
    case awaitPredecessors
    /// Take the cross-process lease.
    case acquireLease
    /// Wait for the lease's holder to announce a change, or at most `for`: until its lease
    /// lapses, as ``LeaseHolderWait`` bounds it.
    case awaitLeaseHolder(for: Duration)
    /// Give the lease back before the callers get the flight's result: it adopts a stored
    /// model, or it has its own (stored, failed, or signed out elsewhere).
    case releaseLease
    /// Give the lease back after the authorizer failed, and have it keep every process off
    /// the key for the back-off this process remembers (``TokenStore/LeaseGrants/release(_:backingOff:)``):
    /// a fleet sends one request per back-off step, not one per replica.
    case releaseLeaseBackingOff(LeaseBackOff)
    /// Wait until `until` (on the injected clock), `delay` after the decision: the refresh-loop
    /// guard holds back a non-interactive authorizer's authorization.
    case backOff(until: Duration, delay: Duration)
    /// Wait until `until` (on the injected clock), `delay` after a transient failure with
    /// `code`, before attempt `attempt` of the authorizer.
    case awaitRetry(until: Duration, attempt: Int, delay: Duration, code: AuthCoordinatorError.Code)
    /// The one guard before a token request under the lease (after any wait: a retry's
    /// back-off): renew the grant now, which confirms it is still this flight's with a whole
    /// time to live ahead, and read the store under it. Reports ``StepOutcome/loaded(_:)``, or
    /// ``StepOutcome/leaseLost`` when the grant is gone or cannot be confirmed.
    case confirmLease
    /// Call the authorizer.
    case authorize(AuthorizationReason, replacing: AuthModel?)
    /// Write the new model to the store before the waiters resume.
    case persist(AuthModel)
    /// Store a stopped refresh's late result (its flight is no longer the key's current one),
    /// then report ``StepOutcome/lateResultSaved(_:)`` or ``StepOutcome/lateResultUnsaved(_:)``.
    case persistLateResult(AuthModel)
    /// Wait until `until` (on the injected clock) before saving again a model served whose
    /// save failed (rule 21); reports ``StepOutcome/backedOff``, or
    /// ``StepOutcome/waitCancelled`` when the task was cancelled.
    case awaitSaveRetry(until: Duration)
    /// Save again, in the key's store order, a model served whose save failed (attempt
    /// `attempt`): reports ``StepOutcome/saved``, ``StepOutcome/saveFailed(_:)``,
    /// ``StepOutcome/leaseLost`` or ``StepOutcome/signedOutElsewhere``. With
    /// `confirmingGrant`, memory forgot the model on a sign-out announced elsewhere: the write
    /// is made only once the lease answered that the retry's grant is current (never "in
    /// doubt, yes"; in doubt, ``StepOutcome/saveFailed(_:)``, asked again after the next wait).
    case retrySave(AuthModel, attempt: Int, confirmingGrant: Bool = false)
    /// Memory let go of a model whose save is being retried (a newer model replaced it, or a
    /// sign-out's announcement emptied memory), but an earlier attempt may have written it
    /// after a sign-out elsewhere (its checks after the write could not be made): ask the
    /// lease whether the retry's grant is current, and undo the write if not and the store
    /// still holds it. Reports ``StepOutcome/saved`` (current: the write stands, or was
    /// never made), ``StepOutcome/signedOutElsewhere`` (signed out: undone where the store
    /// held it) or ``StepOutcome/saveFailed(_:)`` (the lease could not answer: asked again
    /// after the retry's next wait).
    case checkWrite(AuthModel)
    /// The flight has its result, but a sign-out was announced while it held `grant` and the
    /// lease has not said yet whether the grant predates it: before its callers get the model,
    /// the flight asks the lease itself (in doubt, not current). Reports
    /// ``StepOutcome/grantConfirmed(current:)``.
    case confirmGrant(LeaseGrant)
    /// Memory's unsaved model, obtained under `grant`, is newer than what the store holds, and
    /// the flight would spend its refresh token: the lease is asked whether a sign-out came
    /// since `grant` was taken (the announcement may be late). Reports
    /// ``StepOutcome/unsavedGrantChecked(_:_:)``.
    case checkUnsavedGrant(LeaseGrant)

    /// The phase whose deadline bounds this step.
    var phase: AuthEvent.FlightPhase {
      switch self {
      case .load, .confirmLease, .checkUnsavedGrant: return .load
      case .awaitPredecessors, .acquireLease, .awaitLeaseHolder, .releaseLease,
        .releaseLeaseBackingOff, .backOff, .awaitRetry, .authorize:
        return .authorization
      case .persist, .persistLateResult, .awaitSaveRetry, .retrySave, .checkWrite, .confirmGrant:
        return .save
      }
    }
  }

  /// A step and the instant (on the injected clock) by which it must finish: `nil` when a
  /// deadline already armed for the flight bounds it.
  struct Step: Equatable {
    var kind: StepKind
    var deadline: Duration?
  }

  /// What taking the lease got.
  enum LeaseOutcome: Equatable {
    case acquired
    /// Acquired, and the lease read the store while granting (the flight's re-read).
    case acquiredWithRead(AuthModel?)
    case heldElsewhere(until: Date)
    /// Another process's authorization failed and the lease keeps everyone off the key until
    /// `until` (``TokenStore/LeaseAttempt/backingOff(until:failures:code:)``).
    case backingOff(until: Date, failures: Int, code: String)
    case failed(AuthCoordinatorError)
  }

  /// What a step produced.
  enum StepOutcome: Equatable {
    /// The store was read; `nil` when it holds nothing servable, or could not be read (the
    /// failure is reported, and the flight authorizes as if the store were empty).
    case loaded(AuthModel?)
    /// The authorizer answered.
    case authorized(Result<AuthModel, AuthCoordinatorError>)
    /// The model is stored.
    case saved
    /// The model was not stored because the flight no longer holds the lease (another holder
    /// took it over and may have stored a newer model): it is neither served nor cached; the
    /// flight reads the store and serves what it holds (rule 16). Also what
    /// ``StepKind/confirmLease`` reports when the grant is gone.
    case leaseLost
    /// The model could not be stored: it is served and kept unsaved, and its save retried.
    /// `obtainedUnder`: the lease grant the flight obtained it under, if any.
    case saveFailed(AuthModel, obtainedUnder: LeaseGrant? = nil)
    /// The save was not made: the user signed out in another process since the lease was taken.
    case signedOutElsewhere
    /// The lease said whether the flight's grant outlives the sign-out announced while the
    /// flight held it (``StepKind/confirmGrant(_:)``).
    case grantConfirmed(current: Bool)
    /// The lease said whether `grant`, under which memory's unsaved model was obtained, is
    /// current (no sign-out since), or could not say (``StepKind/checkUnsavedGrant(_:)``).
    case unsavedGrantChecked(LeaseGrant, Result<Bool, AuthCoordinatorError>)
    /// The stopped flights the key waited for have finished.
    case predecessorsFinished
    /// The lease was taken, or found held.
    case leaseAttempted(LeaseOutcome)
    /// The lease's holder announced a change, or its lease lapsed.
    case leaseHolderChanged
    /// The lease was given back.
    case leaseReleased
    /// The loop guard's back-off, or a retry's, is over.
    case backedOff
    /// A stopped flight's late result was stored (`nil`: it was not, because the flight lost
    /// its lease to a later holder).
    case lateResultSaved(AuthModel?)
    /// A stopped flight's late result was not stored, or was undone: the user signed out in
    /// another process since its lease was taken.
    case lateResultSignedOut
    /// A stopped refresh's result could not be stored: memory keeps it unsaved if it is newer,
    /// and its save is retried.
    case lateResultUnsaved(AuthModel, obtainedUnder: LeaseGrant? = nil)
    /// A wait ended early because the flight's task was cancelled.
    case waitCancelled
  }

  /// What the refresh-loop guard decided about an authorization it counts.
  enum LoopGuardDecision: Equatable {
    /// Within the limit: start now.
    case admitted
    /// Beyond the limit, with an interactive authorizer: fail.
    case refused
    /// Beyond the limit, with a non-interactive authorizer: start after `delay`.
    case delayed(Duration)
  }

  /// How a request is resolved before it is decided.
  enum Rejection: Equatable {
    /// An ordinary request: any valid model will do.
    case none
    /// A forced refresh rejecting this token.
    case token(String)
    /// A forced refresh on a cold key naming no token: the stored model is the rejected one.
    case storedModel
    /// A forced refresh with nothing cached to reject.
    case nothing
  }

  enum RequestAction: Equatable {
    /// Answer at once with this model.
    case serve(AuthModel)
    /// Wait for the flight in progress.
    case join(flight: UInt64)
    /// Start a new flight (with the given id) at this step, and wait for it.
    case start(flight: UInt64, Step)
    /// The flight in progress can only return the rejected token: wait until it ends, then ask
    /// again rejecting that token.
    case retryAfter(flight: UInt64, rejecting: String)
    /// Fail at once: the refresh-loop guard refused another authorization.
    case refuse(AuthCoordinatorError)
    /// Answer at once with this valid model, and start a background flight (with the given
    /// id) at this step to refresh it ahead of expiry; nobody waits for it.
    case serveAndRefreshAhead(AuthModel, flight: UInt64, Step)
    /// Fail at once: the key remembers this failure (a ``SilentRefreshPolicy`` cooldown).
    case failFast(AuthCoordinatorError)
    /// Answer at once with this model, not expired but inside the leeway: the key's refresh
    /// failed transiently and the policy serves stale models.
    case serveStale(AuthModel)
  }

  /// What to do after a step of flight `id` finished.
  enum AdvanceAction: Equatable {
    /// The report is stale (the flight was stopped or replaced): do nothing.
    case ignore
    /// The authorizer's result arrived for a flight that was already stopped: discard it.
    case discardLateResult
    /// Carry out the next step of the same flight (for a stopped refresh, the only one is
    /// ``StepKind/persistLateResult(_:)``).
    case next(Step)
    /// The flight is over.
    case end(Ending)
    /// The save retry of a flight that is over ended: `saved`, or no longer needed (replaced,
    /// signed out, the lease lost, the task cancelled).
    case saveRetryOver(saved: Bool)
  }

  /// How a flight ended, and what everyone waiting on it gets.
  struct Ending: Equatable {
    enum Result: Equatable {
      case succeeded(AuthModel)
      case failed(AuthCoordinatorError)
      case timedOut(AuthEvent.FlightPhase, AuthCoordinatorError)
      case cancelled(AuthEvent.CancelReason)
    }

    /// What forced refreshes that waited for the flight to end (``RequestAction/retryAfter(flight:rejecting:)``) get.
    enum Followers: Equatable {
      /// Ask again.
      case askAgain
      /// Fail with this error (the account signed out).
      case fail(AuthCoordinatorError)
    }

    var flight: UInt64
    var result: Result
    /// The flight's effects, handed back by the machine (``AccountStateMachine/finish(_:)``):
    /// the queues to seal, the task to cancel.
    var effects: Effects?
    var followers: Followers = .askAgain
    /// The flight ended because a store operation did not finish in time: report it.
    var storeTimedOut: AuthEvent.StoreOperation?
    /// The flight ended because the refresh-loop guard refused the authorization it needed.
    var refusedByLoopGuard = false
    /// The model came from the store, where another process (or a stopped flight) put it:
    /// nothing was authorized.
    var adoptedFromStore = false
    /// The flight was stopped while its authorizer was spending a refresh token: the
    /// authorizer finishes, and its result is stored.
    var letsRefreshFinish = false
    /// The model was served but not stored: the flight's task goes on retrying its save,
    /// beginning with this step (``AccountStateMachine/beginSaveRetry(_:_:now:)``).
    var saveRetry: Step?
    /// For a stopped refresh (``letsRefreshFinish``): when (on the injected clock) later
    /// flights stop waiting for it (``AccountStateMachine/abandon(_:)``).
    var abandonAt: Duration?
    /// For a failure: the model the waiters get instead of the error (stale-if-error: not
    /// expired, only inside the leeway), with its own expiry.
    var stale: AuthModel?
    /// For a failure: the key remembers it for this long (a cooldown began).
    var cooldown: Duration?
    /// Stopped from outside while its task still has a save retry to carry out (its save
    /// failed before it asked the lease about its grant, ``StepKind/confirmGrant(_:)``): the
    /// task is not cancelled; the retry goes on once its step returns.
    var leavesSaveRetry = false

    /// Whether the flight's work must be cancelled (it was stopped before producing a result).
    var stopsWork: Bool {
      switch result {
      // A flight whose save ran out of time still saves: its model is served and cached.
      case .succeeded, .failed: return false
      case .timedOut, .cancelled: return !letsRefreshFinish && !leavesSaveRetry
      }
    }
  }

  /// What to do when the last caller waiting on flight `id` left.
  enum LastWaiterAction: Equatable {
    /// The event is stale.
    case ignore
    /// Keep the flight running without waiters.
    case keepRunning
    /// Close the flight's queue if no one joined meanwhile (atomically with joins), then report
    /// ``AccountStateMachine/queueClosed(_:)``.
    case closeQueue
  }
}
