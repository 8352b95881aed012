import Foundation

/// The decisions for one account key, as a value type with no tasks, clocks or I/O.
///
/// The coordinator feeds it events (a request arrived, a step of the flight finished, a
/// deadline passed, the exchange began, the last waiter left, the account signed out) and
/// carries out the action each event returns. It is the one record of the key's flight: its
/// id, its phase, what forced refreshes rejected, whether the exchange began, and the handle of
/// its effects (`Effects`: the callers' queue and the task, which the machine holds but never
/// looks into; an ending hands it back). It is the one record of the key's stopped flights too
/// (``stopped``). Every flight has a
/// unique id; an event for a flight that is no longer the current one is stale and returns
/// "ignore", which is what makes late results, timeouts and logouts safe. A transition the
/// machine's own actions cannot lead to is a `preconditionFailure`.
///
/// The phases of a flight are data (``StepKind``), the one enum of them: a new phase is a new
/// case there with its transitions here, and one more case in the flight runner.
///
/// The machine is spread over files by concern: this one (the state, the requests, the cold
/// load), `+Advancing` (a step's outcome: what comes next, the persisting and releasing
/// phases), `+Stops` (what stops a flight from outside: the exchange's start,
/// deadlines, the last waiter leaving, sign-outs), `+Authorizing` (what a flight does before it
/// calls the authorizer: predecessors, the lease, the re-read), `+StoppedFlights` (every
/// ending, the record of stopped flights, and the late results of stopped refreshes),
/// `+Unsaved` (models served but not stored), `+SaveRetry` (their retries), `+LoopGuard`,
/// `+SilentRefresh` (refresh ahead, retries, cooldowns, stale-if-error), `+Actions` and `+State`
/// (its vocabulary). Its state is
/// internal only so that those files can reach it: nothing outside `AccountStateMachine*.swift`
/// reads or writes it.
struct AccountStateMachine<Effects: FlightEffects> {
  /// What is known about the key's model.
  enum Cache: Equatable {
    /// The store has not been read since launch (or since the key was evicted).
    case unknown
    /// Known to have no model (store read empty, or signed out).
    case empty
    /// A model, valid or expired.
    case model(Cached)
  }

  /// The key's flight, if one is running, in its phase.
  ///
  /// The two phases whose records are large (hundreds of bytes) and that only a flight under
  /// the lease passes through are boxed, so that every key's machine, idle ones included, does
  /// not carry room for them.
  enum State: Equatable {
    case idle
    case loading(Loading)
    indirect case preparing(Preparing)
    case authorizing(Authorizing)
    case persisting(id: UInt64, model: AuthModel, holdsLease: Bool)
    /// The flight has its result and gives the cross-process lease back before its callers
    /// get it (a process may exit as soon as they have it, and the others would wait for the
    /// lease to lapse).
    indirect case releasing(Ending)
  }

  /// What every key's machine of one coordinator shares: its policy and its jitter source.
  final class Settings: Sendable {
    let policy: Policy
    /// The jitter source, a number in `0..<1` (the configuration's `random`).
    let random: @Sendable () -> Double

    init(policy: Policy, random: @escaping @Sendable () -> Double) {
      self.policy = policy
      self.random = random
    }
  }

  let key: AccountKey
  /// Shared by the coordinator's machines: a policy is about 300 bytes, and a service caches
  /// many keys.
  let settings: Settings
  var policy: Policy { settings.policy }
  /// The jitter source, a number in `0..<1` (the configuration's `random`).
  var random: @Sendable () -> Double { settings.random }
  var cache: Cache = .unknown
  var state: State = .idle
  /// The handle of the current flight's effects, from ``attach(_:to:)`` to its ending.
  var effects: Effects?
  /// When (on the injected clock) authorizations counted by the refresh-loop guard began
  /// (forced refreshes, and renewals of models that arrived inside the leeway), oldest first.
  var loopGuardStarts: [Duration] = []
  /// Flights that were stopped before their work ended: the refreshes left to finish (their
  /// results are not served, but a rotated refresh token is never thrown away), and the
  /// flights whose work is being cancelled.
  var stopped: [UInt64: StoppedFlight] = [:]
  /// A failure the key remembers under a ``SilentRefreshPolicy`` (`nil`: none, or over).
  var cooldown: Cooldown?
  /// Transient failures of the authorizer since the key's last model: the back-off doubles
  /// with each.
  var transientFailures = 0
  /// Refresh tokens of the key that the server refused (``AuthCoordinatorError/refusesRefreshToken``),
  /// newest last, at most ``refusedRefreshTokenLimit``: never handed to the authorizer again,
  /// whatever the store still holds.
  var refusedRefreshTokens: [String] = []
  /// Refresh tokens of the models this process's authorizations replaced (handed to the
  /// authorizer, or refused by the server before), newest last, at most
  /// ``replacedRefreshTokenLimit``: a stored model carrying one is older than memory's unsaved
  /// model (rule 21, ``preferred(overStored:)``).
  var replacedRefreshTokens: [String] = []
  /// Access tokens the current flight's callers rejected, kept while it persists its model: a
  /// deposed flight serves what the store holds, never one of them (rule 16).
  var persistingRejections: Set<String> = []
  /// Saves being retried (rule 21), by the flight whose task retries them.
  var saveRetries: [UInt64: SaveRetry] = [:]
  /// Saves that went on past their deadline (rule 10: the model was served and cached then),
  /// by flight, until the save's outcome arrives: one that finds the user signed out makes
  /// memory forget the model too.
  var savesPastDeadline: [UInt64: AuthModel] = [:]
  /// The flight that goes on after a sign-out announcement until the lease says whether its
  /// grant predates the sign-out (``signOutAnnounced(flightHoldsGrant:)``), and the model it
  /// left in memory if it ended first.
  @Rare var signOutCheck: (flight: UInt64, model: AuthModel?, grant: LeaseGrant?)?
  /// The flight that has its result and asks the lease, before serving it, whether its grant
  /// outlives a sign-out announced while it held it (``StepKind/confirmGrant(_:)``).
  var confirmingGrant: UInt64?
  /// The deadline of that question (``confirmation(before:now:)``).
  var confirmDeadline: Duration?
  init(key: AccountKey, policy: Policy, random: @escaping @Sendable () -> Double = { 0.5 }) {
    self.init(key: key, settings: Settings(policy: policy, random: random))
  }

  /// A machine that shares `settings` with the coordinator's other machines.
  init(key: AccountKey, settings: Settings) {
    self.key = key
    self.settings = settings
  }

  // MARK: - Queries

  /// The cached model, valid or not.
  var cachedModel: AuthModel? {
    if case .model(let cached) = cache { return cached.model }
    return nil
  }

  /// The cached model if it is valid at `date` and no refresh ahead is due: what an ordinary
  /// request is served without deciding anything (a due refresh ahead is decided by
  /// ``request(_:date:now:newFlightID:)``).
  func servableModel(at date: Date) -> AuthModel? { servable(at: date)?.model }

  /// The cached model if it is servable at `date` (``servableModel(at:)``), and the window in
  /// which it stays servable for as long as the machine does not change: a hit can keep a
  /// copy and decide later, from the copy and the window alone, what this machine would.
  func servable(at date: Date) -> (model: AuthModel, window: HitWindow)? {
    // While a flight asks the lease whether its model is a signed-out session's
    // (``StepKind/confirmGrant(_:)``), memory's model is not served: requests join the flight.
    guard confirmingGrant == nil, case .model(let cached) = cache else { return nil }
    let window = HitWindow(leeway: cached.leeway, refreshAheadAt: cached.refreshAheadAt)
    guard window.admits(cached.model, at: date) else { return nil }
    return (cached.model, window)
  }

  /// Memory holds a model whose save has not landed (rule 21): the key must not be forgotten.
  var hasUnsavedModel: Bool {
    if case .model(let cached) = cache { return cached.unsaved }
    return false
  }

  /// The id of the flight in progress.
  var flightID: UInt64? {
    switch state {
    case .idle: return nil
    case .loading(let loading): return loading.id
    case .preparing(let preparing): return preparing.id
    case .authorizing(let authorizing): return authorizing.id
    case .persisting(let id, _, _): return id
    case .releasing(let ending): return ending.flight
    }
  }

  /// Whether the key can be forgotten without losing a decision: no flight, and no
  /// authorization in the refresh-loop window (evicting it would reset the guard).
  /// A stopped flight whose work is not yet cancelled keeps the key too: the key's next flight
  /// waits until that cancellation was delivered before it starts, which a forgotten key could
  /// not.
  /// A save that ran past its deadline, or a save's retry, keeps the key too: its outcome
  /// decides whether the model it served is saved again, and a report that finds no key is
  /// dropped (randomized stress under load, seed 0x5a8016f8c649661c).
  func isEvictable(now: Duration) -> Bool {
    guard case .idle = state, !hasUnsavedModel, savesPastDeadline.isEmpty, saveRetries.isEmpty
    else { return false }
    for flight in stopped.values {
      guard case .cancelled = flight.fate, flight.effects?.workStopped ?? true else { return false }
    }
    // A remembered failure outlives eviction no more than its own time: keeping the key until
    // it ends is what stops an evicted key from asking a refusing server again at once.
    if let cooldown, cooldown.until > now { return false }
    guard let last = loopGuardStarts.max() else { return true }
    return last <= now - policy.loopWindow
  }

  // MARK: - Events

  /// The work of stopped flights that a new flight deals with before its first step
  /// (``attach(_:to:)``).
  struct StoppedWork {
    /// Flights whose work was told to stop, maybe not delivered yet: the new flight waits
    /// until their cancellation was delivered.
    var cancelling: [Effects] = []
    /// Stopped refreshes still running whose result will never be stored (the user signed out
    /// since): the new flight cancels their work first. A refresh whose result is discarded
    /// is no reason to let it run beside a new authorization (rule 1).
    var discarded: [Effects] = []
  }

  /// The coordinator made the effects of flight `id`, which a request just started: the
  /// machine holds them until the flight ends.
  ///
  /// - Returns: The stopped flights whose work may still run: the new flight starts only once
  ///   each was told to stop and that was delivered (a new authorization never runs beside one
  ///   not told to stop). They are no longer recorded.
  mutating func attach(_ effects: Effects, to id: UInt64) -> StoppedWork {
    precondition(flightID == id && self.effects == nil, "Internal inconsistency: attaching \(id)")
    self.effects = effects
    var work = StoppedWork()
    for (stoppedID, flight) in stopped {
      switch flight.fate {
      case .cancelled:
        // Recorded until its cancellation was delivered: a flight that waits for it may be
        // stopped before that, and the one after it must wait for it too.
        guard let effects = flight.effects, !effects.workStopped else {
          stopped.removeValue(forKey: stoppedID)
          continue
        }
        work.cancelling.append(effects)
      case .refreshing(storesResult: false):
        // The new flight's task cancels it; until that was delivered, it is a cancelled one.
        if let effects = flight.effects {
          work.discarded.append(effects)
          stopped[stoppedID] = StoppedFlight(fate: .cancelled, effects: effects)
        } else {
          stopped.removeValue(forKey: stoppedID)
        }
      case .refreshing(storesResult: true):
        break
      }
    }
    return work
  }

  /// A caller asks for a model.
  ///
  /// - Parameters:
  ///   - refresh: The caller's policy.
  ///   - date: The wall-clock time, for expiry.
  ///   - now: The injected clock's time, for the loop window and deadlines.
  ///   - newFlightID: The id to use if a flight must start.
  mutating func request(
    _ refresh: RefreshPolicy, date: Date, now: Duration, newFlightID: @autoclosure () -> UInt64
  ) -> RequestAction {
    let rejection = resolve(refresh)
    if confirmingGrant == nil, case .model(let cached) = cache,
      cached.model.isValid(at: date, leeway: cached.leeway)
    {
      switch rejection {
      case .none:
        // Inside the advisory window of a silent-refresh policy: served, and refreshed ahead.
        if let due = cached.refreshAheadAt, date >= due, case .idle = state,
          mayRefreshAhead(now: now)
        {
          let id = newFlightID()
          return .serveAndRefreshAhead(cached.model, flight: id, refreshAhead(id, now: now))
        }
        return .serve(cached.model)
      case .token(let token) where token != cached.model.accessToken: return .serve(cached.model)
      default: break
      }
    }

    switch state {
    case .loading(var loading):
      loading.note(rejection)
      state = .loading(loading)
      return .join(flight: loading.id)
    case .preparing(var preparing):
      // The re-read chose its model and the lease is being given back before it is served:
      // recording the rejection now would be too late (fleet simulation, seed 0x505f1).
      if case .releasing(let chosen) = preparing.stage, case .token(let token) = rejection,
        token == chosen.accessToken
      {
        return .retryAfter(flight: preparing.id, rejecting: token)
      }
      if case .token(let token) = rejection { preparing.rejectedTokens.insert(token) }
      if preparing.reason == .refreshAhead { preparing.callerJoined = true }
      state = .preparing(preparing)
      return .join(flight: preparing.id)
    case .authorizing(var authorizing):
      // Recorded, so that stale-if-error never serves what a joiner rejected (rule 27), and
      // a refresh ahead that needs the user may involve it for the caller that joined.
      if case .token(let token) = rejection { authorizing.rejectedTokens.insert(token) }
      if authorizing.reason == .refreshAhead { authorizing.callerJoined = true }
      state = .authorizing(authorizing)
      return .join(flight: authorizing.id)
    case .persisting(let id, let next, _):
      if case .token(let token) = rejection, token == next.accessToken {
        return .retryAfter(flight: id, rejecting: token)
      }
      if case .token(let token) = rejection { persistingRejections.insert(token) }
      return .join(flight: id)
    case .releasing(let ending):
      if case .token(let token) = rejection, case .succeeded(let next) = ending.result,
        token == next.accessToken
      {
        return .retryAfter(flight: ending.flight, rejecting: token)
      }
      return .join(flight: ending.flight)
    case .idle:
      break
    }
    if let answer = cooledDown(rejection, date: date, now: now) { return answer }

    if cache == .unknown {
      let id = newFlightID()
      var loading = Loading(id: id)
      loading.note(rejection)
      state = .loading(loading)
      return .start(flight: id, step(.load, now: now))
    }
    let forced = rejection != .none
    let reason: AuthorizationReason =
      forced ? .forcedRefresh : (cachedModel == nil ? .missing : .expired)
    // Renewing a model that arrived inside the leeway, again and again, is a loop too.
    let counted: Bool
    if case .model(let cached) = cache, reason == .expired {
      counted = cached.arrivedInsideLeeway
    } else {
      counted = forced
    }
    let decision = counted ? admitLoopGuardedAuthorization(now: now) : .admitted
    if decision == .refused { return .refuse(loopGuardError()) }
    // Drawn only for a flight that starts: the coordinator counts flights by their ids.
    let id = newFlightID()
    var rejected: Set<String> = []
    if case .token(let token) = rejection { rejected.insert(token) }
    if case .delayed(let delay) = decision {
      return .start(
        flight: id, backOff(id, delay, reason: reason, rejecting: rejected, now: now))
    }
    return .start(
      flight: id,
      beginAuthorization(
        id, reason: reason, rejecting: rejected, replacing: cachedModel, justRead: false,
        now: now))
  }

  /// A model stored, read with a grant, or returned for another user is never handed out: a
  /// read of one finds nothing, and an authorizer's answer with one is a failure. Nor is a
  /// stored model of a user whose logout did not reach the store (`removalFailed`): a read
  /// finds nothing.
  func ownUsers(_ outcome: StepOutcome, removalFailed: Bool = false) -> StepOutcome {
    if removalFailed {
      switch outcome {
      case .loaded(.some): return .loaded(nil)
      case .leaseAttempted(.acquiredWithRead(.some)): return .leaseAttempted(.acquiredWithRead(nil))
      default: break
      }
    }
    switch outcome {
    case .loaded(let model?) where model.account != key.account:
      return .loaded(nil)
    case .leaseAttempted(.acquiredWithRead(let model?)) where model.account != key.account:
      return .leaseAttempted(.acquiredWithRead(nil))
    case .authorized(.success(let model)) where model.account != key.account:
      return .authorized(
        .failure(
          AuthCoordinatorError(
            .authorizationFailed, "the authorizer returned a model for another user")))
    default:
      return outcome
    }
  }

  // MARK: - Transitions

  mutating func loaded(
    _ loading: Loading, _ model: AuthModel?, date: Date, now: Duration
  ) -> AdvanceAction {
    cache = model.map { .model(cached($0, from: date)) } ?? .empty
    let rejected =
      model.map { loading.rejectsStoredModel || loading.rejectedTokens.contains($0.accessToken) }
      ?? false
    if let model, model.isValid(at: date, leeway: policy.refreshLeeway), !rejected {
      state = .idle
      recovered()
      return .end(Ending(flight: loading.id, result: .succeeded(model)))
    }
    let reason: AuthorizationReason =
      rejected ? .forcedRefresh : (model == nil ? .missing : .expired)
    let decision = loading.hasForcedRequest ? admitLoopGuardedAuthorization(now: now) : .admitted
    if decision == .refused {
      state = .idle
      return .end(
        Ending(flight: loading.id, result: .failed(loopGuardError()), refusedByLoopGuard: true))
    }
    var rejectedTokens = loading.rejectedTokens
    if loading.rejectsStoredModel, let model { rejectedTokens.insert(model.accessToken) }
    if case .delayed(let delay) = decision {
      return .next(
        backOff(loading.id, delay, reason: reason, rejecting: rejectedTokens, now: now))
    }
    return .next(
      beginAuthorization(
        loading.id, reason: reason, rejecting: rejectedTokens, replacing: model, justRead: true,
        now: now))
  }

  func step(_ kind: StepKind, now: Duration) -> Step {
    let timeout: Duration
    switch kind.phase {
    case .load, .save: timeout = policy.storeTimeout
    case .authorization, .exchange: timeout = policy.authorizationTimeout
    }
    return Step(kind: kind, deadline: CoordinatorClock.deadline(after: timeout, from: now))
  }

  func resolve(_ refresh: RefreshPolicy) -> Rejection {
    switch refresh {
    case .ifNeeded: return .none
    case .force(let token?): return .token(token)
    case .force(nil):
      switch cache {
      case .model(let cached): return .token(cached.model.accessToken)
      case .unknown: return .storedModel
      case .empty: return .nothing
      }
    }
  }
}
