/// Something that happened inside the coordinator, for logs and metrics.
///
/// Events never carry an access token or an auth code. Cache hits and joins are not events
/// (they are counted in ``AuthCoordinator/Statistics``), so the stream stays quiet on the hot path.
/// A flight's closing event (succeeded, failed, cancelled, timed out) is emitted after its
/// counters were updated and its waiters resumed, so a reader that sees it and then reads the
/// statistics sees them already counted.
public enum AuthEvent: Sendable, Hashable {
  /// A flight started for `key`, to load the store or to authorize.
  case flightStarted(key: AccountKey, flight: UInt64)
  /// The authorizer was called.
  case authorizationStarted(key: AccountKey, flight: UInt64, reason: AuthorizationReason)
  /// The flight produced a model and served its waiters.
  case flightSucceeded(key: AccountKey, flight: UInt64, waiters: Int)
  /// The flight failed; its waiters got an error with `code`. `message` is that error's
  /// description (`AuthCoordinatorError(code): message (underlying: ...)`), as redacted as the
  /// error itself: error messages never carry a token, an auth code or a secret, and the URLs of
  /// the underlying error are printed without user info, query and fragment (the same text
  /// ``storeFailed(key:operation:message:)`` and ``modelUnsaved(key:flight:message:)`` carry).
  case flightFailed(
    key: AccountKey, flight: UInt64, code: AuthCoordinatorError.Code, message: String)
  /// The flight ran past its deadline.
  case flightTimedOut(key: AccountKey, flight: UInt64, phase: FlightPhase)
  /// The flight was cancelled: its last waiter left, or the account signed out.
  case flightCancelled(key: AccountKey, flight: UInt64, reason: CancelReason)
  /// A result arrived for a flight that no longer counts (timed out, cancelled, signed out);
  /// it was discarded.
  case lateResultDiscarded(key: AccountKey, flight: UInt64)
  /// A stopped flight's authorizer returned a model after all, and no sign-out happened
  /// since: it was stored (a rotated refresh token is never lost), though not served to the
  /// callers that already failed.
  case lateResultSaved(key: AccountKey, flight: UInt64)
  /// The flight found a valid model in the store, obtained by another process (or by a
  /// stopped flight), and adopted it instead of authorizing.
  case adoptedFromStore(key: AccountKey, flight: UInt64)
  /// Another process signed `account` out (`nil`: everyone); this process forgot the user's
  /// models and stopped their flights.
  case signedOutElsewhere(account: String?)
  /// The refresh-loop guard refused to start another authorization (an interactive
  /// authorizer).
  case refreshLoopStopped(key: AccountKey)
  /// The refresh-loop guard delayed the next authorization of a non-interactive authorizer by
  /// `delay`; its callers wait.
  case refreshLoopBackedOff(key: AccountKey, delay: Duration)
  /// The store failed; the coordinator carried on without it.
  case storeFailed(key: AccountKey?, operation: StoreOperation, message: String)
  /// An account status change was applied.
  case accountStatusChanged(AccountStatusChange)
  /// An idle key was evicted from memory.
  case evicted(key: AccountKey)
  /// The save of the model flight `flight` obtained failed (`message` says why, redacted). The
  /// model was served anyway and stays memory's model for `key`, marked unsaved: a re-read never
  /// replaces it with an older stored one, the next refresh spends its refresh token, and the
  /// save is retried with back-off (`Configuration.saveRetryDelay`).
  case modelUnsaved(key: AccountKey, flight: UInt64, message: String)
  /// A retry of an unsaved model's save failed too; the next one follows after a longer delay.
  case saveRetryFailed(key: AccountKey, attempt: Int, message: String)
  /// A retry stored the unsaved model: the store holds what memory serves again.
  case unsavedModelSaved(key: AccountKey)
  /// An unsaved model is no longer retried: a newer model replaced it, or a logout removed it.
  case unsavedModelDropped(key: AccountKey)
  /// The flight's cross-process lease was taken over or lapsed while it held it (a renewal
  /// found it gone, or failed until the grant would have lapsed): the flight stops renewing
  /// and does not store its result, which another holder may have superseded.
  case leaseLost(key: AccountKey, flight: UInt64)
  /// The flight held the lease for `Configuration.maximumHold` and gave it up: another
  /// process may authorize now.
  case leaseHoldEnded(key: AccountKey, flight: UInt64)
  /// A stopped refresh was still running `Configuration.maximumHold` after it began: later
  /// flights of the key stop waiting for it, and its result, if it ever arrives, is discarded.
  case refreshAbandoned(key: AccountKey, flight: UInt64)
  /// A cache hit inside a silent-refresh policy's advisory window started flight `flight` to
  /// refresh the model ahead of its expiry (reason ``AuthorizationReason/refreshAhead``); the
  /// hit was answered with the cached model.
  case refreshAheadStarted(key: AccountKey, flight: UInt64)
  /// A silent authorizer failed transiently (`code`): flight `flight` calls it again, attempt
  /// `attempt` (counted from 1), after `delay` (the back-off, or the server's `Retry-After`).
  case retryScheduled(
    key: AccountKey, flight: UInt64, attempt: Int, delay: Duration,
    code: AuthCoordinatorError.Code)
  /// Flight `flight` failed transiently and the policy serves stale models: its waiters, and
  /// requests during the cooldown that follows, get the cached model, which has not expired,
  /// with its own expiry.
  case staleServed(key: AccountKey, flight: UInt64)
  /// The key remembers a failure with `code` for `duration`: requests meanwhile get it at once
  /// (or a stale model) instead of starting a flight.
  case cooldownEntered(key: AccountKey, code: AuthCoordinatorError.Code, duration: Duration)
  /// The estimate of how far the token servers' clocks are ahead of this process's moved (by a
  /// second or more, or its first sample): ``AuthCoordinator/Statistics/serverClockOffset``.
  case serverClockOffsetUpdated(Duration)
  /// The revocation at the server of a signed-out model's tokens ended
  /// (``Authorizer/revokesOnSignOut``): revoked, or failed with a code. It never carries a
  /// token.
  case signOutRevocation(key: AccountKey, outcome: RevocationOutcome)

  /// How the revocation of a signed-out model's tokens ended.
  public enum RevocationOutcome: Sendable, Hashable {
    /// The server confirmed the revocation.
    case revoked
    /// The revocation failed: the authorizer threw (a server error, no connection), or it did
    /// not end within ``AuthCoordinator/Configuration/revocationTimeout``
    /// (``AuthCoordinatorError/Code-swift.struct/timedOut``). Nothing retries it.
    case failed(code: AuthCoordinatorError.Code, message: String)
  }

  /// The phase a flight was in.
  public enum FlightPhase: String, Sendable, Hashable {
    /// Reading the store (a cold start).
    case load
    /// Waiting for the authorizer (for example, while the user is in another app).
    case authorization
    /// In ``AuthorizationRequest/exchange(_:)``: for example, exchanging an auth code at the
    /// integrator's server.
    case exchange
    /// Writing the new model to the store.
    case save
  }

  /// Why a flight was cancelled.
  public enum CancelReason: String, Sendable, Hashable {
    /// Every waiter left.
    case lastWaiterLeft
    /// The account logged out, unbound, or everything was signed out.
    case signedOut
  }

  /// The store operation that failed.
  public enum StoreOperation: String, Sendable, Hashable {
    /// Reading the key's model (a cold start).
    case load
    /// Writing a new model (persist before resume).
    case save
    /// Removing a user's models, every mode (a logout or unbind).
    case remove
    /// Removing every model (``AccountStatusChange/logoutAll``).
    case removeAll
    /// Taking, renewing, releasing or checking the cross-process lease.
    case lease
  }
}
