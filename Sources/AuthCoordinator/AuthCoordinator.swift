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
  struct FlightRecord {
    let key: AccountKey
    let queue: WaiterQueue
    /// Forced refreshes that must wait for this flight to end and then ask again.
    var followers: WaiterQueue?
    var work: Task<Void, Never>?
    /// Set when the authorizer entered ``AuthorizationRequest/exchange(_:)``.
    var exchangeStarted: LockedState<Duration?>?
  }

  struct Account {
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
  nonisolated let hot: HotCache
  nonisolated let counters: CoordinatorCounters
  nonisolated let broadcaster = EventBroadcaster<AuthEvent>(bufferSize: 1024)
  nonisolated let clock: CoordinatorClock
  nonisolated let store: any TokenStore
  nonisolated let authorizer: any Authorizer
  let onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)?
  let policy: AccountStateMachine.Policy

  var accounts: [AccountKey: Account] = [:]
  var flights: [UInt64: FlightRecord] = [:]
  var nextFlightID: UInt64 = 1
  var storeOperations = StoreSequencer()
  /// Users whose logout could not remove their models from the store: whatever a load finds for
  /// them is not served until a later removal succeeds.
  var unremoved = UnremovedUsers()
  var deadlines = DeadlineQueue()
  /// The one task sleeping until the earliest deadline, with the deadline it sleeps until.
  var deadlineSleeper: (until: Duration, generation: UInt64, task: Task<Void, Never>)?
  var sleeperGeneration: UInt64 = 0

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
  func removalFinished(_ change: AccountStatusChange, failure: (any Error)?) {
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
}
