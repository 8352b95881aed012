import Foundation
import SyncPrimitives

/// Answers "what is this user's Alipay login state?" for many concurrent callers: from memory
/// while the token is valid, otherwise through one authorization per account, however many
/// callers ask.
///
/// ```swift
/// let coordinator = AuthCoordinator(
///   store: FileTokenStore(url: storeURL),
///   authorizer: AlipayAuthorizer(provider: provider, exchanger: exchanger),
///   configuration: .init(authorizationTimeout: .seconds(120)))
///
/// let model = try await coordinator.authModel(for: AccountKey(mcUid: "u1"))
/// let fresh = try await coordinator.authModel(
///   for: AccountKey(mcUid: "u1"), refresh: .force(rejecting: model.accessToken))
/// await coordinator.accountStatusChanged(.logout(mcUid: "u1"))
/// ```
///
/// The behaviour contract (serial per key, coalescing, forced refresh, the refresh-loop guard,
/// cancellation, deadlines, logout, persistence, errors, bounded memory, injected time) is in
/// `docs/semantics.md`, each rule with the test that proves it.
///
/// How it is built: a per-key `AccountStateMachine` value makes every decision; this actor
/// carries the decisions out (starts tasks, talks to the store, resumes waiters). Cache hits do
/// not enter the actor: they read a lock-protected mirror of the valid models. Callers that must
/// wait are parked outside the actor in the flight's `WaiterQueue`.
public actor AuthCoordinator {
  private struct FlightRecord {
    let key: AccountKey
    let queue: WaiterQueue
    /// Forced refreshes that must wait for this flight to end and then ask again.
    var followers: WaiterQueue?
    var work: Task<Void, Never>?
    /// Set when the authorizer entered ``AuthorizationRequest/exchange(_:)``.
    var exchangeStarted: LockedState<Duration?>?
  }

  private struct Account {
    var machine: AccountStateMachine
    var lastUsed: UInt64
  }

  /// How a request was admitted. Small on purpose (it is held in the caller's async frame): the
  /// rare immediate answers travel in a box.
  enum Admission: Sendable {
    /// Served or refused at once.
    case answered(Answer)
    /// Park on the flight's queue with this ticket.
    case wait(WaiterQueue, ticket: Int)
    /// Park until the flight ends, then ask again rejecting the token.
    case retryAfter(WaiterQueue, ticket: Int, rejecting: String)
  }

  /// An immediate answer: a model served by the actor, or a refusal.
  final class Answer: Sendable {
    let result: Result<AuthModel, AuthCoordinatorError>
    init(_ result: Result<AuthModel, AuthCoordinatorError>) { self.result = result }

    /// The model, or the error thrown. Out of line, like ``WaiterQueue/result(of:)``.
    @inline(never)
    func get() throws -> AuthModel { try result.get() }
  }

  nonisolated let configuration: Configuration
  nonisolated private let hot: HotCache
  nonisolated private let counters: CoordinatorCounters
  nonisolated private let broadcaster = EventBroadcaster<AuthEvent>(bufferSize: 1024)
  nonisolated private let clock: CoordinatorClock
  nonisolated private let store: any TokenStore
  nonisolated private let authorizer: any Authorizer
  private let onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)?
  private let policy: AccountStateMachine.Policy

  private var accounts: [AccountKey: Account] = [:]
  private var flights: [UInt64: FlightRecord] = [:]
  private var nextFlightID: UInt64 = 1
  private var storeOperations = StoreSequencer()
  /// Users whose logout could not remove their models from the store: whatever a load finds for
  /// them is not served until a later removal succeeds.
  private var unremoved = UnremovedUsers()
  private var deadlines = DeadlineQueue()
  /// The one task sleeping until the earliest deadline, with the deadline it sleeps until.
  private var deadlineSleeper: (until: Duration, generation: UInt64, task: Task<Void, Never>)?
  private var sleeperGeneration: UInt64 = 0

  /// Creates a coordinator.
  ///
  /// - Parameters:
  ///   - store: Where models persist between launches. Default: in memory only.
  ///   - authorizer: What produces a new model on a cache miss.
  ///   - configuration: Timeouts, the loop guard, memory bounds, the clock.
  ///   - onAccountStatusChange: Called after ``accountStatusChanged(_:)`` cleared the account;
  ///     wire it to the SDK's account-status call (`ANXMCAccountStatusChangeModel`).
  public init(
    store: any TokenStore = InMemoryTokenStore(),
    authorizer: any Authorizer,
    configuration: Configuration = Configuration(),
    onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)? = nil
  ) {
    self.store = store
    self.authorizer = authorizer
    self.configuration = configuration
    self.onAccountStatusChange = onAccountStatusChange
    self.clock = CoordinatorClock(configuration.clock)
    let counters = CoordinatorCounters()
    self.counters = counters
    self.hot = HotCache(now: configuration.now, counters: counters)
    self.policy = AccountStateMachine.Policy(
      refreshLeeway: configuration.refreshLeeway.seconds,
      maxForcedAuthorizations: configuration.maxForcedAuthorizations,
      loopWindow: configuration.loopWindow,
      whenAbandoned: configuration.whenAbandoned)
  }

  deinit {
    deadlineSleeper?.task.cancel()
    broadcaster.finish()
  }

  // MARK: - Public API

  /// Returns the login state for `key`: from memory while valid, otherwise from the store or a
  /// new authorization shared with every concurrent caller.
  ///
  /// A cache hit does not enter the actor and never suspends. A miss joins the key's flight in
  /// progress or starts one; the caller then waits outside the actor and is resumed in arrival
  /// order.
  ///
  /// ```swift
  /// let model = try await coordinator.authModel(for: key)
  /// // The container said NeedRefreshToken = YES for the token it was given:
  /// let fresh = try await coordinator.authModel(
  ///   for: key, refresh: .force(rejecting: model.accessToken))
  /// ```
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - refresh: ``RefreshPolicy/ifNeeded`` (default), or ``RefreshPolicy/force(rejecting:)``
  ///     when the container rejected a token.
  ///   - timeout: This caller's own limit on the injected clock. It affects only this caller:
  ///     the flight goes on for the others.
  /// - Returns: A valid model.
  /// - Throws: `CancellationError` when the calling task is cancelled while it waits, or an
  ///   ``AuthCoordinatorError`` (timed out, user cancelled, refresh loop, signed out, ...).
  public nonisolated(nonsending) func authModel(
    for key: AccountKey,
    refresh: RefreshPolicy = .ifNeeded,
    timeout: Duration? = nil
  ) async throws -> AuthModel {
    if case .ifNeeded = refresh {
      switch hot.lookup(key) {
      case .hit(let model): return model
      case .join(let queue, let ticket): return try await joined(queue, ticket: ticket, timeout)
      case .miss: break
      }
    }
    return try await missed(key, refresh: refresh, timeout)
  }

  /// Returns the login state for `key`, reading the container's `extendParams`.
  ///
  /// `NeedRefreshToken`, `needReAuth` or `needOpenAuth` set to a yes value (any key case;
  /// `true`, a non-zero number, or `YES`/`true`/`1` in any case) make it a forced refresh of the
  /// token cached at the time of the call.
  ///
  /// ```swift
  /// let model = try await coordinator.authModel(
  ///   for: key, extendParams: ["NeedRefreshToken": "YES"])
  /// ```
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - extendParams: The dictionary the container passed.
  ///   - timeout: This caller's own limit.
  /// - Returns: A valid model.
  /// - Throws: As ``authModel(for:refresh:timeout:)``.
  public nonisolated(nonsending) func authModel(
    for key: AccountKey,
    extendParams: [String: any Sendable],
    timeout: Duration? = nil
  ) async throws -> AuthModel {
    let refresh = RefreshPolicy(extendParams: extendParams)
    return try await authModel(for: key, refresh: refresh, timeout: timeout)
  }

  /// Signs an account out: cancels its flight (its waiters get
  /// ``AuthCoordinatorError/Code-swift.struct/signedOut``), clears memory and store, and calls
  /// the `onAccountStatusChange` hook.
  ///
  /// When this returns, no request will ever be answered with the old model, including one
  /// whose authorization was still in flight: a late result is discarded. A logout or unbind
  /// removes every mode of the user from the store (``TokenStore/removeModels(forMcUid:)``),
  /// including modes this process never used.
  ///
  /// It returns within ``Configuration/storeTimeout`` even when the store is stuck: memory is
  /// cleared before the first suspension, and the removal then goes on in the background
  /// (reported as a `storeFailed` event), ahead of any later load of the user.
  ///
  /// ```swift
  /// await coordinator.accountStatusChanged(.logout(mcUid: currentUser.id))
  /// ```
  ///
  /// - Parameter change: What happened to the host app's account.
  public func accountStatusChanged(_ change: AccountStatusChange) async {
    // The in-memory effect is complete before the first suspension.
    switch change {
    case .logout(let mcUid), .unbind(let mcUid):
      for key in accounts.keys where key.mcUid == mcUid { signOutInMemory(key) }
    case .logoutAll:
      for key in accounts.keys { signOutInMemory(key) }
      hot.removeAll()
    }
    broadcaster.emit(.accountStatusChanged(change))

    // The removal covers every mode of the user, in memory or not. It is ordered after every
    // store operation already issued for the user (a save of a flight that just finished) and
    // before any issued later (a load cannot read the old model back while it is pending).
    // It runs in a task of its own, so that a stuck store delays this call by at most the
    // store deadline; the removal still happens when the store comes back.
    let turn: StoreTurn
    let operation: AuthEvent.StoreOperation
    switch change {
    case .logout(let mcUid), .unbind(let mcUid):
      turn = storeOperations.reserveUser(mcUid)
      operation = .remove
    case .logoutAll:
      turn = storeOperations.reserveBarrier()
      operation = .removeAll
    }
    let store = self.store
    Task { [weak self] in
      await turn.waitForTurn()
      var failure: (any Error)?
      do {
        switch change {
        case .logout(let mcUid), .unbind(let mcUid): try await store.removeModels(forMcUid: mcUid)
        case .logoutAll: try await store.removeAll()
        }
      } catch {
        failure = error
      }
      await self?.removalFinished(change, failure: failure)
      turn.done.open()
    }
    let limit = storeTimeout
    if await !turn.done.wait(until: clock.deadline(after: limit), on: clock) {
      reportStoreFailure(
        nil, operation,
        AuthCoordinatorError(
          .storeFailed,
          "the store did not finish the removal within \(limit); it goes on in the background"))
    }
    await onAccountStatusChange?(change)
  }

  /// Records whether a logout's removal reached the store.
  private func removalFinished(_ change: AccountStatusChange, failure: (any Error)?) {
    if let failure {
      reportStoreFailure(nil, change == .logoutAll ? .removeAll : .remove, failure)
    }
    unremoved.removal(of: change, succeeded: failure == nil)
  }

  /// A stream of what happens inside the coordinator. Each access returns a new subscription
  /// that receives the events emitted from then on. Events never contain tokens.
  ///
  /// ```swift
  /// Task { for await event in coordinator.events { logger.info("\(event)") } }
  /// ```
  public nonisolated var events: AsyncStream<AuthEvent> { broadcaster.subscribe() }

  /// A snapshot of the counters. Readable from any context without waiting for the actor.
  public nonisolated var statistics: Statistics {
    var snapshot = counters.snapshot
    snapshot.cacheHits += hot.hitCount
    return snapshot
  }

  // MARK: - Slow path (caller side)

  // The entry point keeps only the lookup: its async frame is allocated on every call, hits
  // included, so the waiting paths live in functions of their own.

  /// A caller that joined the flight in progress through the hot cache: park on it.
  @inline(never)
  nonisolated(nonsending) private func joined(
    _ queue: WaiterQueue, ticket: Int, _ timeout: Duration?
  ) async throws -> AuthModel {
    guard let timeout else { return try queue.result(of: await queue.park(ticket)) }
    let deadline = clock.deadline(after: timeout)
    return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
  }

  /// A miss with no flight to join, or a forced refresh: ask the actor.
  @inline(never)
  nonisolated(nonsending) private func missed(
    _ key: AccountKey, refresh: RefreshPolicy, _ timeout: Duration?
  ) async throws -> AuthModel {
    guard let timeout else { return try await authModelSlowPath(key, refresh: refresh) }
    return try await authModelWithTimeout(key, refresh: refresh, timeout: timeout)
  }

  /// A miss: enter the actor, then (usually) park on the flight outside it.
  ///
  /// Kept lean on purpose: only the queue, the ticket and the retry state are live across the
  /// park, and the result is read synchronously (out of line) after waking, so a parked caller's
  /// async frames stay small (see docs/benchmarks.md, "Memory per parked caller").
  @inline(__always)
  nonisolated(nonsending) private func authModelSlowPath(
    _ key: AccountKey, refresh: RefreshPolicy
  ) async throws -> AuthModel {
    var refresh = refresh
    while true {
      switch try await admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await queue.park(ticket))
      case .retryAfter(let queue, let ticket, let rejecting):
        // Rare: a forced refresh of the token a flight is persisting asks again once it ended.
        try queue.checkEnded(await queue.park(ticket))
        refresh = .force(rejecting: rejecting)
      }
    }
  }

  /// Parks on `queue` with a timer that makes the caller leave at `deadline`.
  @inline(never)
  nonisolated(nonsending) private func park(
    on queue: WaiterQueue, ticket: Int, until deadline: Duration
  ) async -> WaiterQueue.Wake {
    let clock = self.clock
    let timer = Task {
      do { try await clock.sleepUntil(deadline) } catch { return }
      queue.leave(ticket, .timedOut)
    }
    defer { timer.cancel() }
    return await queue.park(ticket)
  }

  /// A request with the caller's own timeout: every park is bounded by the same deadline.
  @inline(never)
  nonisolated(nonsending) private func authModelWithTimeout(
    _ key: AccountKey, refresh: RefreshPolicy, timeout: Duration
  ) async throws -> AuthModel {
    var refresh = refresh
    let deadline = clock.deadline(after: timeout)
    while true {
      switch try await admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
      case .retryAfter(let queue, let ticket, let rejecting):
        try queue.checkEnded(await park(on: queue, ticket: ticket, until: deadline))
        refresh = .force(rejecting: rejecting)
      }
    }
  }

  // MARK: - Decisions carried out (actor side)

  @inline(never)  // its temporaries would otherwise land in the parked caller's async frame
  func admit(_ key: AccountKey, refresh: RefreshPolicy) throws -> Admission {
    // A caller cancelled before it arrives never joins or starts a flight.
    try Task.checkCancellation()
    let isNew = accounts[key] == nil
    let tick = hot.nextTick()
    let action = accounts[key, default: Account(machine: .init(policy: policy), lastUsed: tick)]
      .machine.request(
        refresh, date: configuration.now(), now: clock.now(), newFlightID: nextFlightID)
    accounts[key]!.lastUsed = tick
    defer {
      if isNew {
        evictIfNeeded()
        counters.update { $0.keysInMemory = accounts.count }
      }
    }

    switch action {
    case .serve(let model):
      counters.update { $0.cacheHits += 1 }
      return .answered(Answer(.success(model)))

    case .join(let id):
      guard let record = flights[id], let ticket = record.queue.reserve() else {
        preconditionFailure("Internal inconsistency: joining flight \(id) that has no open queue")
      }
      counters.update { $0.coalescedCallers += 1 }
      return .wait(record.queue, ticket: ticket)

    case .start(let id, let step):
      nextFlightID += 1
      let queue = WaiterQueue(counters: counters) { [weak self] in
        Task { await self?.lastWaiterLeft(id) }
      }
      let ticket = queue.reserve()!
      flights[id] = FlightRecord(key: key, queue: queue)
      hot.setFlight(queue, for: key)
      counters.update {
        $0.flightsStarted += 1
        $0.flightsInProgress += 1
      }
      broadcaster.emit(.flightStarted(key: key, flight: id))
      let first: FlightStep
      switch step {
      case .load:
        first = .load(storeOperations.reserve(key))
        armDeadline(id, at: clock.deadline(after: storeTimeout), phase: .load)
      case .authorize(let reason): first = beginAuthorization(key, flight: id, reason: reason)
      }
      flights[id]?.work = Task { [weak self] in await self?.runFlight(key, flight: id, first: first)
      }
      return .wait(queue, ticket: ticket)

    case .retryAfter(let id, let rejecting):
      guard var record = flights[id] else {
        preconditionFailure("Internal inconsistency: following flight \(id) that is not running")
      }
      let followers = record.followers ?? WaiterQueue(counters: counters)
      record.followers = followers
      flights[id] = record
      return .retryAfter(followers, ticket: followers.reserve()!, rejecting: rejecting)

    case .refuse(let code):
      counters.update { $0.refreshLoopsStopped += 1 }
      broadcaster.emit(.refreshLoopStopped(key: key))
      return .answered(
        Answer(
          .failure(
            AuthCoordinatorError(
              code,
              "more than \(policy.maxForcedAuthorizations) forced refreshes (or renewals of "
                + "tokens shorter than the refresh leeway) of \(key) within "
                + "\(configuration.loopWindow); not bouncing the user to Alipay again"))))
    }
  }

  /// The next effect of a flight: decided on the actor, carried out by the flight's task.
  enum FlightStep: Sendable {
    /// Read the store (cold start), in the key's store order.
    case load(StoreTurn)
    /// Call the authorizer.
    case authorize(AuthorizationRequest)
    /// Write the new model, in the key's store order, before the waiters resume.
    case persist(AuthModel, StoreTurn)
  }

  /// The flight's one task: carries out each step and asks the actor for the next. A step's
  /// report names the flight, so a flight that was stopped meanwhile gets no next step and
  /// whatever it produced is discarded.
  nonisolated private func runFlight(_ key: AccountKey, flight id: UInt64, first: FlightStep) async
  {
    var next: FlightStep? = first
    while let step = next {
      switch step {
      case .load(let turn):
        await turn.waitForTurn()
        let result: Result<AuthModel?, any Error>
        do { result = .success(try await store.model(for: key)) } catch { result = .failure(error) }
        turn.done.open()
        next = await storeLoaded(key, flight: id, result: result)
      case .authorize(let request):
        let result: Result<AuthModel, AuthCoordinatorError>
        do {
          let model = try await authorizer.authorize(request)
          result =
            model.mcUid == key.mcUid
            ? .success(model)
            : .failure(
              AuthCoordinatorError(
                .authorizationFailed, "the authorizer returned a model for another user"))
        } catch {
          result = .failure(Self.wrap(error))
        }
        next = await authorizationFinished(id, result: result)
      case .persist(let model, let turn):
        await turn.waitForTurn()
        var failure: (any Error)?
        do { try await store.save(model, for: key) } catch { failure = error }
        turn.done.open()
        await persisted(id, key: key, saveFailure: failure)
        next = nil
      }
    }
  }

  private func storeLoaded(
    _ key: AccountKey, flight id: UInt64, result: Result<AuthModel?, any Error>
  ) -> FlightStep? {
    var loaded: AuthModel?
    switch result {
    case .success(let model):
      // A model stored for another user is never handed out, nor one a failed logout left.
      loaded = model.flatMap { $0.mcUid == key.mcUid ? $0 : nil }
      if loaded != nil, unremoved.covers(key.mcUid) { loaded = nil }
    case .failure(let error):
      reportStoreFailure(key, .load, error)
    }
    guard accounts[key] != nil else { return nil }
    let action = accounts[key]!.machine.loaded(
      id, model: loaded, date: configuration.now(), now: clock.now())
    syncHotCache(key)
    switch action {
    case .discard:
      return nil
    case .complete(let model):
      finishFlight(id, with: .success(model))
      return nil
    case .authorize(let reason):
      return beginAuthorization(key, flight: id, reason: reason)
    case .fail(let code):
      counters.update { $0.refreshLoopsStopped += 1 }
      broadcaster.emit(.refreshLoopStopped(key: key))
      finishFlight(
        id, with: .failure(AuthCoordinatorError(code, "refresh loop stopped for \(key)")))
      return nil
    }
  }

  /// Prepares the authorizer call of flight `id`: its request, its deadline, its counters.
  private func beginAuthorization(
    _ key: AccountKey, flight id: UInt64, reason: AuthorizationReason
  ) -> FlightStep {
    let exchangeStarted = LockedState<Duration?>(nil)
    let clock = self.clock
    let signal = ExchangeSignal { [weak self] in
      let now = clock.now()
      exchangeStarted.withLock { $0 = now }
      Task { await self?.exchangeBegan(id, at: now) }
    }
    let request = AuthorizationRequest(
      key: key, reason: reason, requestID: UUID().uuidString, exchangeSignal: signal)
    flights[id]?.exchangeStarted = exchangeStarted
    counters.update { $0.authorizationsStarted += 1 }
    broadcaster.emit(.authorizationStarted(key: key, flight: id, reason: reason))
    armDeadline(
      id, at: clock.deadline(after: configuration.authorizationTimeout), phase: .authorization)
    return .authorize(request)
  }

  private func armDeadline(_ id: UInt64, at deadline: Duration, phase: AuthEvent.FlightPhase) {
    deadlines.insert(.init(at: deadline, flight: id, phase: phase))
    // Entries of ended flights are dropped once they outnumber the live ones.
    if deadlines.count > 2 * flights.count + 64 {
      deadlines.prune { flights[$0] != nil }
    }
    scheduleDeadlineSleeper()
  }

  /// Makes sure one task sleeps until the earliest deadline.
  private func scheduleDeadlineSleeper() {
    guard let earliest = deadlines.earliest else {
      deadlineSleeper?.task.cancel()
      deadlineSleeper = nil
      return
    }
    if let sleeper = deadlineSleeper, sleeper.until <= earliest { return }
    deadlineSleeper?.task.cancel()
    sleeperGeneration += 1
    let generation = sleeperGeneration
    let clock = self.clock
    let task = Task { [weak self] in
      do { try await clock.sleepUntil(earliest) } catch { return }
      await self?.deadlinesDue(generation)
    }
    deadlineSleeper = (earliest, generation, task)
  }

  private func deadlinesDue(_ generation: UInt64) {
    if deadlineSleeper?.generation == generation { deadlineSleeper = nil }
    for entry in deadlines.popDue(now: clock.now()) {
      deadlineReached(entry.flight, phase: entry.phase)
    }
    scheduleDeadlineSleeper()
  }

  private func exchangeBegan(_ id: UInt64, at start: Duration) {
    guard let record = flights[id], let machine = accounts[record.key]?.machine,
      machine.flight?.id == id, case .authorizing = machine.flight?.phase
    else { return }
    armDeadline(
      id, at: clock.deadline(after: configuration.exchangeTimeout, from: start), phase: .exchange)
  }

  private func deadlineReached(_ id: UInt64, phase: AuthEvent.FlightPhase) {
    guard let record = flights[id], accounts[record.key] != nil else { return }
    // The authorization deadline no longer applies once the exchange began.
    if phase == .authorization, record.exchangeStarted?.withLock({ $0 }) != nil { return }
    let key = record.key
    switch accounts[key]!.machine.deadlineReached(id, phase: phase, date: configuration.now()) {
    case .ignore:
      return
    case .stop:
      let limit =
        phase == .authorization
        ? configuration.authorizationTimeout : configuration.exchangeTimeout
      broadcaster.emit(.flightTimedOut(key: key, flight: id, phase: phase))
      stopFlight(
        id, as: .timedOut,
        failing: AuthCoordinatorError.timedOut(
          "the \(phase.rawValue) did not finish within \(limit)"))
    case .failLoad:
      let error = AuthCoordinatorError(
        .storeFailed, "the token store did not answer the load within \(storeTimeout)")
      reportStoreFailure(key, .load, error)
      broadcaster.emit(.flightTimedOut(key: key, flight: id, phase: phase))
      stopFlight(id, as: .timedOut, failing: error)
    case .complete(let model):
      // Rule 10: the waiters get the model; the save goes on and its outcome is reported.
      reportStoreFailure(
        key, .save,
        AuthCoordinatorError(
          .storeFailed, "the token store did not finish the save within \(storeTimeout)"))
      syncHotCache(key)
      finishFlight(id, with: .success(model))
    }
  }

  private func authorizationFinished(
    _ id: UInt64, result: Result<AuthModel, AuthCoordinatorError>
  ) -> FlightStep? {
    guard let record = flights[id], accounts[record.key] != nil else {
      counters.update { $0.lateResultsDiscarded += 1 }
      return nil
    }
    let key = record.key
    switch accounts[key]!.machine.authorized(id, result: result) {
    case .discard:
      counters.update { $0.lateResultsDiscarded += 1 }
      broadcaster.emit(.lateResultDiscarded(key: key, flight: id))
      return nil
    case .persist(let model):
      armDeadline(id, at: clock.deadline(after: storeTimeout), phase: .save)
      return .persist(model, storeOperations.reserve(key))
    case .fail:
      guard case .failure(let error) = result else { return nil }
      finishFlight(id, with: .failure(error))
      return nil
    }
  }

  private func persisted(_ id: UInt64, key: AccountKey, saveFailure: (any Error)?) {
    if let saveFailure { reportStoreFailure(key, .save, saveFailure) }
    guard let record = flights[id], accounts[record.key] != nil else { return }
    switch accounts[record.key]!.machine.persisted(id, date: configuration.now()) {
    case .discard:
      break
    case .complete(let model):
      syncHotCache(record.key)
      finishFlight(id, with: .success(model))
    }
  }

  private func lastWaiterLeft(_ id: UInt64) {
    guard let record = flights[id],
      accounts[record.key]?.machine.lastWaiterLeft(
        id, closeQueue: { record.queue.closeIfIdle(.failure(CancellationError())) }) == .stop
    else { return }
    broadcaster.emit(.flightCancelled(key: record.key, flight: id, reason: .lastWaiterLeft))
    stopFlight(id, as: .cancelled, failing: CancellationError())
  }

  private func signOutInMemory(_ key: AccountKey) {
    hot.remove(key)
    guard let id = accounts[key]?.machine.signOut() else { return }
    broadcaster.emit(.flightCancelled(key: key, flight: id, reason: .signedOut))
    stopFlight(id, as: .cancelled, failing: AuthCoordinatorError.signedOut(key))
  }

  // MARK: - Effects

  /// Ends a flight that produced a result: the waiters get it, forced refreshes that waited
  /// for the flight ask again.
  private func finishFlight(_ id: UInt64, with result: Result<AuthModel, AuthCoordinatorError>) {
    guard let record = flights.removeValue(forKey: id) else { return }
    hot.setFlight(nil, for: record.key)
    let served: Int
    switch result {
    case .success(let model):
      served = record.queue.finish(.success(model))
      counters.update {
        $0.flightsSucceeded += 1
        $0.flightsInProgress -= 1
      }
      broadcaster.emit(.flightSucceeded(key: record.key, flight: id, waiters: served))
    case .failure(let error):
      record.queue.finish(.failure(error))
      counters.update {
        $0.flightsFailed += 1
        $0.flightsInProgress -= 1
      }
      broadcaster.emit(.flightFailed(key: record.key, flight: id, code: error.code))
    }
    record.followers?.finish(.retry)
    evictIfNeeded()
  }

  /// How a stopped flight is counted.
  private enum StopKind {
    case cancelled
    case timedOut
  }

  /// Ends a flight that will never produce a result (timed out, cancelled, signed out): its work
  /// is cancelled and anything it returns later is discarded.
  private func stopFlight(_ id: UInt64, as kind: StopKind, failing error: any Error) {
    guard let record = flights.removeValue(forKey: id) else { return }
    hot.setFlight(nil, for: record.key)
    // One update, so that every snapshot balances (the authorizer's cancellation handler below
    // may read the statistics).
    counters.update {
      $0.flightsInProgress -= 1
      switch kind {
      case .cancelled: $0.flightsCancelled += 1
      case .timedOut: $0.flightsTimedOut += 1
      }
    }
    record.work?.cancel()
    record.queue.finish(.failure(error))
    // Forced refreshes waiting for this flight ask again, unless the account signed out.
    let signedOut = (error as? AuthCoordinatorError)?.code == .signedOut
    record.followers?.finish(signedOut ? .failure(error) : .retry)
    evictIfNeeded()
  }

  private func reportStoreFailure(
    _ key: AccountKey?, _ operation: AuthEvent.StoreOperation, _ error: any Error
  ) {
    counters.update { $0.storeFailures += 1 }
    broadcaster.emit(.storeFailed(key: key, operation: operation, message: "\(error)"))
  }

  private func syncHotCache(_ key: AccountKey) {
    guard let machine = accounts[key]?.machine else { return hot.set(nil, for: key) }
    hot.set(machine.cachedModel, leeway: machine.cacheLeeway, for: key)
  }

  /// How long one store operation may take before the coordinator stops waiting for it: the
  /// configured store timeout, and never longer than the authorization timeout.
  private var storeTimeout: Duration {
    min(configuration.storeTimeout, configuration.authorizationTimeout)
  }

  /// Evicts the least recently used idle keys beyond ``Configuration/maxIdleKeys``.
  private func evictIfNeeded() {
    let idle = accounts.count - flights.count
    let limit = max(configuration.maxIdleKeys, 0)
    guard idle > limit else { return }
    // Evict a little more than needed so a steady stream of new keys costs amortised O(1).
    let count = idle - limit + limit / 16
    var candidates: [(key: AccountKey, lastUsed: UInt64)] = []
    candidates.reserveCapacity(idle)
    let now = clock.now()
    for (key, account) in accounts where account.machine.isEvictable(now: now) {
      candidates.append((key, max(account.lastUsed, hot.lastUsed(key) ?? 0)))
    }
    candidates.sort { $0.lastUsed < $1.lastUsed }
    for candidate in candidates.prefix(count) {
      accounts.removeValue(forKey: candidate.key)
      hot.remove(candidate.key)
      storeOperations.forget(candidate.key)
      broadcaster.emit(.evicted(key: candidate.key))
    }
    counters.update {
      $0.evictions += min(count, candidates.count)
      $0.keysInMemory = accounts.count
    }
  }

  private static func wrap(_ error: any Error) -> AuthCoordinatorError {
    if let error = error as? AuthCoordinatorError { return error }
    if error is CancellationError {
      return AuthCoordinatorError(
        .authorizationFailed, "the authorizer was cancelled", underlying: error)
    }
    return AuthCoordinatorError(.authorizationFailed, "the authorizer failed", underlying: error)
  }
}
