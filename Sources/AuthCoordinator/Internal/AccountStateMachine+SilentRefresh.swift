import Foundation

// The decisions of a silent-refresh policy (``SilentRefreshPolicy``): when a cache hit
// refreshes ahead, when a failure is retried inside its flight, what the key remembers of a
// failure (a cooldown), and when a stale model is served instead of an error.
extension AccountStateMachine {
  /// Why the flight in progress authorizes, once it knows.
  var reason: AuthorizationReason? {
    switch state {
    case .preparing(let preparing): return preparing.reason
    case .authorizing(let authorizing): return authorizing.reason
    default: return nil
    }
  }

  // MARK: - Refresh ahead

  /// When a model that arrived at `date` is due for a refresh ahead: `expiresAt` minus the
  /// policy's window, less a random part of it (``SilentRefreshPolicy/refreshAheadJitter``);
  /// `nil` without a window or without an expiry.
  ///
  /// A short-lived model's window, cut to half its lifetime, may lie inside its leeway (at most
  /// half its lifetime too: a 2-minute token under the default 60-second leeway, and a
  /// 4-minute one for some jitter draws). Its refresh ahead is then due halfway through the
  /// life it has before the leeway (less the same jitter), so it is refreshed ahead too, and
  /// its leeway stays what the configuration says.
  func refreshAheadDate(for model: AuthModel, arrivedAt date: Date) -> Date? {
    guard policy.silent.refreshAhead != nil, let expiresAt = model.expiresAt else { return nil }
    // Clamped to a century: `Duration` cannot hold `Date.distantFuture`.
    let remaining = min(expiresAt.timeIntervalSince(date), 100 * 365 * 86_400)
    guard remaining > 0, let window = policy.silent.window(forLifetime: .seconds(remaining))
    else { return nil }
    let jitter = min(max(policy.silent.refreshAheadJitter, 0), 1)
    let share = 1 - jitter * random()
    let lead = window.seconds * share
    let leeway = Self.leeway(policy.refreshLeeway, forModelExpiring: expiresAt, obtainedAt: date)
    if lead > leeway { return expiresAt.addingTimeInterval(-lead) }
    // Only a window cut to half the lifetime moves; a window chosen no wider than the leeway
    // (`.fixed(leeway)`) means no refresh ahead.
    let beforeLeeway = remaining - leeway
    guard window.seconds >= remaining / 2 - 0.001, beforeLeeway > 0 else { return nil }
    return expiresAt.addingTimeInterval(-(leeway + beforeLeeway * share / 2))
  }

  /// Whether a refresh ahead may start now: no failure is remembered.
  func mayRefreshAhead(now: Duration) -> Bool {
    guard let cooldown else { return true }
    return now >= cooldown.until
  }

  /// Starts flight `id` to refresh the cached model ahead of its expiry. One try per model: a
  /// failure that is remembered (a transient one) makes it due again when the cooldown ends.
  /// The re-read adopts only another model (another process refreshed): the cached one is
  /// still valid, and the point is to replace it.
  mutating func refreshAhead(_ id: UInt64, now: Duration) -> Step {
    guard case .model(var cached) = cache else {
      preconditionFailure("Internal inconsistency: a refresh ahead without a model")
    }
    cached.refreshAheadAt = nil
    cache = .model(cached)
    return beginAuthorization(
      id, reason: .refreshAhead, rejecting: [cached.model.accessToken], replacing: cached.model,
      justRead: false, now: now)
  }

  // MARK: - Refused refresh tokens

  /// The most refused refresh tokens a key remembers: one per family that died in this
  /// process's lifetime, more than enough (a new family replaces the stored model).
  static var refusedRefreshTokenLimit: Int { 8 }

  /// The server refused `token`: memory's model keeps its access token but loses the refresh
  /// token, and no model read later hands it to the authorizer again.
  mutating func refuse(refreshToken token: String) {
    if !refusedRefreshTokens.contains(token) {
      refusedRefreshTokens.append(token)
      if refusedRefreshTokens.count > Self.refusedRefreshTokenLimit {
        refusedRefreshTokens.removeFirst()
      }
    }
    if case .model(var cached) = cache, cached.model.refreshToken == token {
      cached.model.refreshToken = nil
      cache = .model(cached)
    }
  }

  /// `model` without its refresh token if the server refused it.
  func withoutRefusedRefreshToken(_ model: AuthModel) -> AuthModel {
    guard let token = model.refreshToken, refusedRefreshTokens.contains(token) else { return model }
    var model = model
    model.refreshToken = nil
    return model
  }

  // MARK: - Failures

  /// The most consecutive failures the key counts: the back-off has long reached its limit
  /// by then, and no count (its own, or one read from a lease) can overflow.
  static var maxCountedFailures: Int { 64 }

  /// The key has a valid model again: the failures it remembered are over.
  mutating func recovered() {
    cooldown = nil
    transientFailures = 0
  }

  /// The back-off before the next attempt after the key's ``transientFailures``: jittered
  /// between half of it and all of it, and never shorter than the server's `Retry-After`.
  func nextDelay(after error: AuthCoordinatorError) -> Duration {
    let silent = policy.silent
    let base = Self.backoff(
      transientFailures, first: silent.retryDelay, limit: silent.maxRetryDelay)
    return max(base * (0.5 + 0.5 * random()), error.retryAfter ?? .zero)
  }

  /// What a flight does after its authorizer failed with `error`: a silent authorizer's
  /// transient failure is retried after a back-off when attempts are left and the back-off
  /// fits (``SilentRefreshPolicy/maxRetryWait``, the flight's deadline); otherwise the flight
  /// ends, the key may remember the failure, and the waiters may get a stale model.
  mutating func authorizationFailed(
    _ authorizing: Authorizing, _ error: AuthCoordinatorError, date: Date, now: Duration
  ) -> AdvanceAction {
    let silent = policy.silent
    if authorizing.reason == .refreshAhead, authorizing.callerJoined,
      error.code == .interactionRequired, policy.interactiveAuthorizer, policy.allowsInteraction
    {
      // The refresh ahead could not go on without the user, and a caller that may involve
      // the user is waiting for it: the flight authorizes again, for that caller (rule 24).
      let reason: AuthorizationReason =
        authorizing.rejectedTokens.isEmpty ? .expired : .forcedRefresh
      guard authorizing.holdsLease else {
        return .next(
          authorize(
            authorizing.id, reason: reason, replacing: cachedModel, now: now, deadline: nil,
            holdsLease: false, rejecting: authorizing.rejectedTokens))
      }
      // Under the lease, the guard comes first (rule 16): the declined call was a wait too.
      var preparing = Preparing(
        id: authorizing.id, reason: reason, rejectedTokens: authorizing.rejectedTokens,
        stage: .rereading, holdsLease: true)
      return .next(reread(&preparing, now: now))
    }
    if error.refusesRefreshToken, let refused = authorizing.spentRefreshToken {
      refuse(refreshToken: refused)
    }
    var ending = Ending(flight: authorizing.id, result: .failed(error))
    ending.stale = staleModel(
      after: error, reason: authorizing.reason, rejecting: authorizing.rejectedTokens, date: date)
    // An interactive authorizer's failure is the user's: never retried, never remembered.
    // A silent-first authorizer's, before it turned to the user, is a silent one's.
    let silentStage = policy.announcesInteraction && !authorizing.interactionBegan
    guard !policy.interactiveAuthorizer || silentStage else {
      return releasing(ending, holdsLease: authorizing.holdsLease)
    }
    var remembered: Duration = .zero
    if error.isTransient {
      transientFailures = min(transientFailures, Self.maxCountedFailures - 1) + 1
      if silent.retryDelay > .zero { remembered = nextDelay(after: error) }
      let fitsDeadline = authorizing.deadline.map { now + remembered < $0 } ?? true
      if authorizing.attempt < silent.maxAttempts, remembered <= silent.maxRetryWait,
        fitsDeadline
      {
        let attempt = authorizing.attempt + 1
        state = .preparing(
          Preparing(
            id: authorizing.id, reason: authorizing.reason,
            rejectedTokens: authorizing.rejectedTokens, stage: .awaitingRetry(attempt: attempt),
            holdsLease: authorizing.holdsLease, authorizationDeadlineArmed: true,
            authorizationDeadline: authorizing.deadline, callerJoined: authorizing.callerJoined))
        return .next(
          Step(
            kind: .awaitRetry(
              until: now + remembered, attempt: attempt, delay: remembered, code: error.code),
            deadline: nil))
      }
    } else if error.code != .interactionRequired {
      remembered = max(silent.failureCooldown, .zero)
    }
    if remembered > .zero {
      remember(
        error, for: remembered, reason: authorizing.reason, in: &ending, date: date, now: now)
    }
    return releasing(ending, holdsLease: authorizing.holdsLease)
  }

  /// The key remembers `error` for `duration` (a cooldown) and the flight's ending says so.
  private mutating func remember(
    _ error: AuthCoordinatorError, for duration: Duration, reason: AuthorizationReason,
    in ending: inout Ending, date: Date, now: Duration
  ) {
    cooldown = Cooldown(error: error, until: now + duration)
    ending.cooldown = duration
    // A refresh ahead that failed transiently is due again once the cooldown is over.
    if error.isTransient, reason == .refreshAhead, case .model(var cached) = cache {
      cached.refreshAheadAt = date
      cache = .model(cached)
    }
  }

  /// The model stale-if-error serves after a failure of a flight authorizing for `reason`:
  /// one that has not expired, renewed because it neared its expiry (never one a caller
  /// rejected: `rejected` holds what the flight's joiners rejected), with its own expiry;
  /// `nil` otherwise.
  private func staleModel(
    after error: AuthCoordinatorError, reason: AuthorizationReason, rejecting rejected: Set<String>,
    date: Date
  ) -> AuthModel? {
    guard policy.silent.servesStaleOnError, error.isTransient,
      reason == .expired || reason == .refreshAhead,
      let model = cachedModel, !rejected.contains(model.accessToken),
      let expiresAt = model.expiresAt, expiresAt > date
    else { return nil }
    return model
  }

  /// The lease keeps every process off the key until `until`: another process's authorization
  /// of it failed (``TokenStore/LeaseAttempt/backingOff(until:failures:code:)``). The flight
  /// ends as if its own authorizer had failed with the other's code, without calling it: the
  /// callers get the error (or a stale model), the key remembers it until the back-off ends, and
  /// the key's next back-off grows from the other process's `failures`. The time left is
  /// bounded by the longest a flight may hold the lease (a back-off lasts no longer than a
  /// holder could).
  mutating func leaseBackingOff(
    _ preparing: Preparing, until: Date, failures: Int, code: String, date: Date, now: Duration
  ) -> AdvanceAction {
    let left = min(max(until.timeIntervalSince(date), 0), policy.maximumHold.seconds)
    let remaining = Duration.milliseconds(Int64((left * 1000).rounded(.up)))
    // A count read from a lease is clamped: a record is input, never trusted to be sane.
    transientFailures = max(transientFailures, min(max(failures, 0), Self.maxCountedFailures))
    let error = AuthCoordinatorError(
      AuthCoordinatorError.Code(rawValue: code),
      "another process's authorization of this key failed; the shared lease keeps every process"
        + " off it until its back-off ends", transient: failures > 0, retryAfter: remaining)
    var ending = Ending(flight: preparing.id, result: .failed(error))
    ending.stale = staleModel(
      after: error, reason: preparing.reason, rejecting: preparing.rejectedTokens, date: date)
    if remaining > .zero {
      remember(error, for: remaining, reason: preparing.reason, in: &ending, date: date, now: now)
    }
    state = .idle
    return .end(ending)
  }

  /// The answer to a request while the key remembers a failure: the error at once (its
  /// ``AuthCoordinatorError/retryAfter`` is the rest of the cooldown), or the cached model if
  /// it has not expired and the policy serves stale models; `nil` when no cooldown runs.
  mutating func cooledDown(_ rejection: Rejection, date: Date, now: Duration) -> RequestAction? {
    guard let cooldown else { return nil }
    guard now < cooldown.until else {
      self.cooldown = nil
      return nil
    }
    if rejection == .none, cooldown.error.isTransient, policy.silent.servesStaleOnError,
      let model = cachedModel, let expiresAt = model.expiresAt, expiresAt > date
    {
      return .serveStale(model)
    }
    var error = cooldown.error
    error.retryAfter = cooldown.until - now
    return .failFast(error)
  }
}
