import Foundation

/// The decisions for one account key, as a value type with no tasks, clocks or I/O.
///
/// The actor feeds it events (a request arrived, the store was read, the authorizer answered,
/// the model was persisted, a deadline passed, the last waiter left, the account signed out) and
/// carries out the action each event returns. Every flight has a unique id; an event for a flight
/// that is no longer the current one is stale and is discarded, which is what makes late results,
/// timeouts and logouts safe.
struct AccountStateMachine {
  /// What is known about the key's model.
  enum Cache: Equatable {
    /// The store has not been read since launch (or since the key was evicted).
    case unknown
    /// Known to have no model (store read empty, or signed out).
    case empty
    /// A model, valid or expired.
    case model(AuthModel)
  }

  /// What a flight is doing.
  enum Phase: Equatable {
    /// Reading the store (cold start).
    case loading
    /// Waiting for the authorizer.
    case authorizing(AuthorizationReason)
    /// Writing the new model to the store before the waiters resume.
    case persisting(AuthModel)
  }

  /// The single flight of this key.
  struct Flight: Equatable {
    var id: UInt64
    var phase: Phase
    /// Tokens that forced-refresh joiners rejected while the store was being read.
    var rejectedTokens: Set<String> = []
    /// A forced-refresh joiner rejected whatever the store holds (it named no token on a cold key).
    var rejectsStoredModel = false
    /// A forced refresh joined while the store was read: an authorization the load leads to counts
    /// for the refresh-loop guard.
    var hasForcedRequest = false
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

  /// The first step of a new flight.
  enum Step: Equatable {
    case load
    case authorize(AuthorizationReason)
  }

  enum RequestAction: Equatable {
    /// Answer at once with this model.
    case serve(AuthModel)
    /// Wait for the flight in progress.
    case join(flight: UInt64)
    /// Start a new flight (with the given id) and wait for it.
    case start(flight: UInt64, Step)
    /// The flight in progress can only return the rejected token: wait until it ends, then ask
    /// again rejecting that token.
    case retryAfter(flight: UInt64, rejecting: String)
    /// Fail at once (the refresh-loop guard).
    case refuse(AuthCoordinatorError.Code)
  }

  enum LoadedAction: Equatable {
    case discard
    /// Serve the stored model: the flight succeeded without authorizing.
    case complete(AuthModel)
    /// Continue the same flight with the authorizer.
    case authorize(AuthorizationReason)
    /// The flight failed (the loop guard refused the authorization it needed).
    case fail(AuthCoordinatorError.Code)
  }

  enum AuthorizedAction: Equatable {
    case discard
    /// Persist this model, then complete.
    case persist(AuthModel)
    /// The flight failed; nothing is cached.
    case fail
  }

  enum PersistedAction: Equatable {
    case discard
    case complete(AuthModel)
  }

  enum DeadlineAction: Equatable {
    /// The deadline is stale or belongs to a phase the flight has left.
    case ignore
    /// The authorization or the exchange ran out: stop the flight, its waiters time out.
    case stop
    /// The store did not answer the load: the flight fails with `store_failed` and nothing is
    /// authorized (a stuck store is no reason to send the user to Alipay).
    case failLoad
    /// The store did not finish the save: the model is served and cached all the same (rule 10),
    /// and the save goes on in the background.
    case complete(AuthModel)
  }

  enum StopAction: Equatable {
    /// The event is stale or does not apply.
    case ignore
    /// The flight is over: stop its work and fail its waiters.
    case stop
    /// Keep the flight running without waiters (``AuthCoordinator/AbandonPolicy/finishAndCache``).
    case keepRunning
  }

  /// The limits the machine enforces.
  struct Policy: Equatable {
    var refreshLeeway: TimeInterval
    var maxForcedAuthorizations: Int
    var loopWindow: Duration
    var whenAbandoned: AuthCoordinator.AbandonPolicy
  }

  let policy: Policy
  private(set) var cache: Cache = .unknown
  /// How long before its expiry the cached model counts as expired: the policy's leeway, or
  /// less for a model that arrived with a lifetime shorter than twice the leeway (see
  /// ``leeway(forModelExpiring:obtainedAt:)``).
  private(set) var cacheLeeway: TimeInterval
  /// The cached model was obtained by an authorization with a lifetime no longer than the
  /// leeway: renewing it counts for the refresh-loop guard.
  private(set) var cacheArrivedInsideLeeway = false
  private(set) var flight: Flight?
  /// When (on the injected clock) authorizations counted by the refresh-loop guard began
  /// (forced refreshes, and renewals of models that arrived inside the leeway), oldest first.
  private(set) var forcedStarts: [Duration] = []

  init(policy: Policy) {
    self.policy = policy
    self.cacheLeeway = policy.refreshLeeway
  }

  /// The cached model, valid or not.
  var cachedModel: AuthModel? {
    if case .model(let model) = cache { return model }
    return nil
  }

  var isIdle: Bool { flight == nil }

  /// Whether the key can be forgotten without losing a decision: no flight, and no
  /// authorization in the refresh-loop window (evicting it would reset the guard).
  func isEvictable(now: Duration) -> Bool {
    guard flight == nil else { return false }
    guard let last = forcedStarts.last else { return true }
    return last <= now - policy.loopWindow
  }

  // MARK: - Events

  /// A caller asks for a model.
  ///
  /// - Parameters:
  ///   - refresh: The caller's policy.
  ///   - date: The wall-clock time, for expiry.
  ///   - now: The injected clock's time, for the loop window.
  ///   - newFlightID: The id to use if a flight must start.
  mutating func request(
    _ refresh: RefreshPolicy, date: Date, now: Duration, newFlightID: UInt64
  ) -> RequestAction {
    let rejection = resolve(refresh)
    let valid = cachedModel.flatMap { $0.isValid(at: date, leeway: cacheLeeway) ? $0 : nil }

    if rejection == .none, let valid { return .serve(valid) }
    if case .token(let token) = rejection, let valid, valid.accessToken != token {
      return .serve(valid)
    }

    if var flight {
      switch flight.phase {
      case .loading:
        flight.noteRejection(rejection)
        self.flight = flight
        return .join(flight: flight.id)
      case .authorizing:
        return .join(flight: flight.id)
      case .persisting(let next):
        if case .token(let token) = rejection, token == next.accessToken {
          return .retryAfter(flight: flight.id, rejecting: token)
        }
        return .join(flight: flight.id)
      }
    }

    if cache == .unknown {
      var flight = Flight(id: newFlightID, phase: .loading)
      flight.noteRejection(rejection)
      self.flight = flight
      return .start(flight: newFlightID, .load)
    }

    let forced = rejection != .none
    let reason: AuthorizationReason =
      forced ? .forcedRefresh : (cachedModel == nil ? .missing : .expired)
    // Renewing a model that arrived inside the leeway, again and again, is a loop too.
    let counted = forced || (reason == .expired && cacheArrivedInsideLeeway)
    if counted, !admitForcedAuthorization(now: now) {
      return .refuse(.refreshLoop)
    }
    flight = Flight(id: newFlightID, phase: .authorizing(reason))
    return .start(flight: newFlightID, .authorize(reason))
  }

  /// The store was read for flight `id`.
  mutating func loaded(_ id: UInt64, model: AuthModel?, date: Date, now: Duration) -> LoadedAction {
    guard var flight, flight.id == id else { return .discard }
    guard flight.phase == .loading else {
      preconditionFailure("Internal inconsistency: store loaded in phase \(flight.phase)")
    }
    cache = model.map(Cache.model) ?? .empty
    cacheLeeway = policy.refreshLeeway
    cacheArrivedInsideLeeway = false
    let rejected =
      model.map { flight.rejectsStoredModel || flight.rejectedTokens.contains($0.accessToken) }
      ?? false
    if let model, model.isValid(at: date, leeway: policy.refreshLeeway), !rejected {
      self.flight = nil
      return .complete(model)
    }
    let reason: AuthorizationReason =
      rejected ? .forcedRefresh : (model == nil ? .missing : .expired)
    if flight.hasForcedRequest, !admitForcedAuthorization(now: now) {
      self.flight = nil
      return .fail(.refreshLoop)
    }
    flight.phase = .authorizing(reason)
    flight.rejectedTokens = []
    flight.rejectsStoredModel = false
    flight.hasForcedRequest = false
    self.flight = flight
    return .authorize(reason)
  }

  /// The authorizer answered for flight `id`.
  mutating func authorized(_ id: UInt64, result: Result<AuthModel, AuthCoordinatorError>)
    -> AuthorizedAction
  {
    guard var flight, flight.id == id, case .authorizing = flight.phase else { return .discard }
    switch result {
    case .success(let model):
      flight.phase = .persisting(model)
      self.flight = flight
      return .persist(model)
    case .failure:
      self.flight = nil
      return .fail
    }
  }

  /// The new model of flight `id` was written to the store (or the write failed and was reported).
  mutating func persisted(_ id: UInt64, date: Date) -> PersistedAction {
    guard let flight, flight.id == id else { return .discard }
    guard case .persisting(let model) = flight.phase else {
      preconditionFailure("Internal inconsistency: persisted in phase \(flight.phase)")
    }
    adopt(model, obtainedAt: date)
    self.flight = nil
    return .complete(model)
  }

  /// A deadline of flight `id` for `phase` passed.
  ///
  /// Each phase that waits on something outside has one: the store load, the authorization,
  /// the exchange, the save. A deadline of a phase the flight has already left does nothing.
  mutating func deadlineReached(
    _ id: UInt64, phase: AuthEvent.FlightPhase, date: Date
  ) -> DeadlineAction {
    guard let flight, flight.id == id else { return .ignore }
    switch (phase, flight.phase) {
    case (.authorization, .authorizing), (.exchange, .authorizing):
      self.flight = nil
      return .stop
    case (.load, .loading):
      // The cache stays unknown: the next request reads the store again.
      self.flight = nil
      return .failLoad
    case (.save, .persisting(let model)):
      adopt(model, obtainedAt: date)
      self.flight = nil
      return .complete(model)
    default:
      return .ignore
    }
  }

  /// Every waiter of flight `id` left.
  ///
  /// Under ``AuthCoordinator/AbandonPolicy/cancel`` the flight stops, but only if `closeQueue`
  /// succeeds: the actor closes the flight's queue atomically with joins that bypass it, and a
  /// caller that joined meanwhile keeps the flight running.
  mutating func lastWaiterLeft(_ id: UInt64, closeQueue: () -> Bool) -> StopAction {
    guard let flight, flight.id == id else { return .ignore }
    // A flight that already has its model finishes and caches it: the save is under way, and
    // dropping the model would leave the store holding what memory forgot.
    if case .persisting = flight.phase { return .keepRunning }
    switch policy.whenAbandoned {
    case .finishAndCache:
      return .keepRunning
    case .cancel:
      guard closeQueue() else { return .keepRunning }
      self.flight = nil
      return .stop
    }
  }

  /// The account logged out or unbound. Returns the flight that must be cancelled, if any.
  mutating func signOut() -> UInt64? {
    let cancelled = flight?.id
    flight = nil
    cache = .empty
    cacheLeeway = policy.refreshLeeway
    cacheArrivedInsideLeeway = false
    forcedStarts.removeAll()
    return cancelled
  }

  // MARK: - Helpers

  private func resolve(_ refresh: RefreshPolicy) -> Rejection {
    switch refresh {
    case .ifNeeded: return .none
    case .force(let token?): return .token(token)
    case .force(nil):
      switch cache {
      case .model(let model): return .token(model.accessToken)
      case .unknown: return .storedModel
      case .empty: return .nothing
      }
    }
  }

  /// Caches a model an authorization produced at `date`.
  private mutating func adopt(_ model: AuthModel, obtainedAt date: Date) {
    cache = .model(model)
    cacheLeeway = Self.leeway(
      policy.refreshLeeway, forModelExpiring: model.expiresAt, obtainedAt: date)
    cacheArrivedInsideLeeway =
      model.expiresAt.map { $0.timeIntervalSince(date) <= policy.refreshLeeway } ?? false
  }

  /// The leeway for a model obtained at `date`: the configured one, but never more than half
  /// the lifetime the model arrived with, so a fresh model is served for at least half of that
  /// lifetime instead of counting as expired on arrival. A model that arrived already expired
  /// gets no leeway (it is expired anyway).
  static func leeway(
    _ configured: TimeInterval, forModelExpiring expiresAt: Date?, obtainedAt date: Date
  ) -> TimeInterval {
    guard let expiresAt else { return configured }
    let lifetime = expiresAt.timeIntervalSince(date)
    return min(configured, max(lifetime, 0) / 2)
  }

  /// The refresh-loop guard: records a forced authorization unless too many started recently.
  private mutating func admitForcedAuthorization(now: Duration) -> Bool {
    let windowStart = now - policy.loopWindow
    if let firstRecent = forcedStarts.firstIndex(where: { $0 > windowStart }) {
      forcedStarts.removeFirst(firstRecent)
    } else {
      forcedStarts.removeAll()
    }
    guard forcedStarts.count < policy.maxForcedAuthorizations else { return false }
    forcedStarts.append(now)
    return true
  }
}

extension AccountStateMachine.Flight {
  /// Records what a forced refresh that joins (or starts) a store load rejects.
  fileprivate mutating func noteRejection(_ rejection: AccountStateMachine.Rejection) {
    switch rejection {
    case .none: return
    case .token(let token): rejectedTokens.insert(token)
    case .storedModel: rejectsStoredModel = true
    case .nothing: break
    }
    hasForcedRequest = true
  }
}
