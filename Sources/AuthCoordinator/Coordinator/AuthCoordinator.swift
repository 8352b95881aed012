import Foundation
import SyncPrimitives

/// Answers "what is this account's login state?" for many concurrent callers: from memory
/// while the token is valid, otherwise through one authorization per account, however many
/// callers ask.
///
/// ```swift
/// let coordinator = AuthCoordinator(
///   store: FileTokenStore(url: storeURL),
///   authorizer: ClosureAuthorizer(isInteractive: false) { request in
///     try await myTokenServer.token(for: request.key)
///   },
///   configuration: .init(authorizationTimeout: .seconds(5)))
///
/// let key = AccountKey(account: "reports-service")
/// let model = try await coordinator.authModel(for: key)
/// // The API rejected the token (a 401): one refresh for every caller that saw it.
/// let fresh = try await coordinator.authModel(
///   for: key, refresh: .force(rejecting: model.accessToken))
/// await coordinator.invalidate(account: "reports-service")  // forget it: memory and store
/// ```
///
/// The behaviour contract (serial per key, coalescing, forced refresh, the refresh-loop guard,
/// cancellation, deadlines, logout, persistence, errors, bounded memory, injected time) is in
/// `Sources/AuthCoordinator/Documentation.docc/Semantics.md`, each rule with the test that proves it.
///
/// How it is built: each account key has an `AccountStateMachine` value that makes every
/// decision and is the one record of the key's flight. The keys live in an `AccountTable` of
/// lock-protected stripes (all modes of one user in one stripe): a request takes its stripe's
/// lock, runs the machine, does the bookkeeping its action asks for, and leaves the lock before
/// any effect. A cache hit is that and nothing more. A caller that must wait parks outside the
/// lock on the flight's `WaiterQueue`; the flight's one task carries out its steps (load,
/// authorize, persist) and reports each to the machine. Keys in different stripes never wait
/// for each other. `docs/architecture.md` draws the path of one request.
public final class AuthCoordinator: Sendable {
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

  /// An immediate answer: a model served after a forced refresh, or a refusal.
  final class Answer: Sendable {
    let result: Result<AuthModel, AuthCoordinatorError>
    init(_ result: Result<AuthModel, AuthCoordinatorError>) { self.result = result }

    /// The model, or the error thrown. Out of line, like ``WaiterQueue/result(of:)``.
    @inline(never)
    func get() throws -> AuthModel { try result.get() }
  }

  let configuration: Configuration
  let table: AccountTable
  /// This coordinator's name in the threads' replicas of the models it served (``HitReplicas``).
  let replicaID = HitReplicas.newCoordinatorID()
  /// The hits served from those replicas, counted per thread.
  let replicaHits = ReplicaHitCounts()
  let broadcaster = EventBroadcaster<AuthEvent>(bufferSize: 1024)
  let clock: CoordinatorClock
  let store: any TokenStore
  /// The cross-process lease, when processes share the store.
  let lease: (any AuthorizationLease)?
  /// This coordinator's name in the lease: unique per process and instance.
  let leaseOwner: String
  let authorizer: any Authorizer
  let onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)?
  /// The policy and jitter source every key's state machine shares.
  let machineSettings: KeyMachine.Settings
  var policy: KeyMachine.Policy { machineSettings.policy }
  /// Wakes the stripes when their deadlines are due.
  let scheduler: DeadlineScheduler
  /// The lease record every flight shares when there is no lease (``HeldLease``). Unchecked:
  /// only taking a grant writes to a record, which needs a lease, so this one is only read.
  nonisolated(unsafe) let unleased = HeldLease(shared: true)
  /// The changes the lease announced, for flights waiting for another process's result.
  let leaseWatch = LeaseWatch()
  /// Listens to the lease's changes.
  private let leaseListener: Task<Void, Never>?
  /// How far the token servers' clocks are off, from what the authorizer reported.
  let serverClock: ServerClockEstimate

  /// Creates a coordinator.
  ///
  /// - Parameters:
  ///   - store: Where models persist between launches. Default: in memory only.
  ///   - lease: Shared with the other processes that use `store` (an app and its extensions,
  ///     workers on one host): one authorization per key across all of them. Default `nil`:
  ///     this process is the store's only user.
  ///   - authorizer: What produces a new model on a cache miss.
  ///   - configuration: Timeouts, the loop guard, memory bounds, the clock.
  ///   - onAccountStatusChange: Called after ``accountStatusChanged(_:)`` (or
  ///     ``invalidate(account:)``) cleared the account; in an mPaaS app, wire it to the SDK's
  ///     account-status call (`ANXMCAccountStatusChangeModel`).
  public init(
    store: any TokenStore = InMemoryTokenStore(),
    lease: (any AuthorizationLease)? = nil,
    authorizer: any Authorizer,
    configuration: Configuration = Configuration(),
    onAccountStatusChange: (@Sendable (AccountStatusChange) async -> Void)? = nil
  ) {
    self.store = store
    self.lease = lease
    self.leaseOwner = "\(ProcessInfo.processInfo.processIdentifier)-\(UUID().uuidString.prefix(8))"
    self.authorizer = authorizer
    self.configuration = configuration
    self.onAccountStatusChange = onAccountStatusChange
    let clock = CoordinatorClock(configuration.clock)
    self.clock = clock
    self.table = AccountTable(stripeCount: AccountTable.defaultStripeCount)
    let policy = KeyMachine.Policy(
      refreshLeeway: configuration.refreshLeeway.seconds,
      maxForcedAuthorizations: configuration.maxForcedAuthorizations,
      loopWindow: configuration.loopWindow,
      loopBackoff: configuration.loopBackoff,
      maxLoopBackoff: configuration.maxLoopBackoff,
      interactiveAuthorizer: authorizer.isInteractive,
      announcesInteraction: authorizer.isInteractive && authorizer.announcesInteraction,
      allowsInteraction: configuration.allowsInteraction,
      whenAbandoned: configuration.whenAbandoned,
      authorizationTimeout: configuration.authorizationTimeout,
      exchangeTimeout: configuration.exchangeTimeout,
      storeTimeout: min(configuration.storeTimeout, configuration.authorizationTimeout),
      saveRetryDelay: configuration.saveRetryDelay,
      maxSaveRetryDelay: configuration.maxSaveRetryDelay,
      usesLease: lease != nil,
      maximumHold: Self.maximumHold(
        configuration, interactive: authorizer.isInteractive,
        longestRefresh: authorizer.longestRefresh,
        silent: configuration.silentRefresh.resolved(over: authorizer.silentRefresh)),
      leaseTimeToLive: configuration.leaseTimeToLive,
      silent: configuration.silentRefresh.resolved(over: authorizer.silentRefresh))
    self.machineSettings = KeyMachine.Settings(policy: policy, random: configuration.random)
    let broadcaster = self.broadcaster
    self.serverClock = ServerClockEstimate { broadcaster.emit(.serverClockOffsetUpdated($0)) }
    let dueHandler = DueHandler()
    self.scheduler = DeadlineScheduler(clock: clock) { dueHandler.coordinator?.deadlinesDue() }
    // Subscribed before any flight can try the lease, so that no change is missed.
    if let changes = lease?.changes() {
      leaseListener = Task {
        for await change in changes {
          guard let coordinator = dueHandler.coordinator else { return }
          coordinator.leaseChanged(change)
        }
      }
    } else {
      leaseListener = nil
    }
    dueHandler.coordinator = self
  }

  deinit {
    // Every thread's copies of this coordinator's models are stale from now on, and dropped.
    for stripe in table.stripes { stripe.lock.markChanged() }
    HitReplicas.purgeEverywhere()
    leaseListener?.cancel()
    scheduler.cancel()
    broadcaster.finish()
  }

  // MARK: - Public API

  /// Returns the login state for `key`: from memory while valid, otherwise from the store or a
  /// new authorization shared with every concurrent caller.
  ///
  /// A cache hit never suspends: it takes one lock, or none when the calling thread holds a
  /// current replica of the key's model. A miss joins the key's flight in progress
  /// or starts one; the caller then waits, holding no lock, and is resumed in arrival order.
  ///
  /// ```swift
  /// let model = try await coordinator.authModel(for: key)
  /// // The API answered 401 (or the container said NeedRefreshToken = YES) for that token:
  /// let fresh = try await coordinator.authModel(
  ///   for: key, refresh: .force(rejecting: model.accessToken))
  /// ```
  ///
  /// - Parameters:
  ///   - key: The account.
  ///   - refresh: ``RefreshPolicy/ifNeeded`` (default), or ``RefreshPolicy/force(rejecting:)``
  ///     when a token was rejected.
  ///   - timeout: This caller's own limit on the injected clock. It affects only this caller:
  ///     the flight goes on for the others.
  /// - Returns: A valid model.
  /// - Throws: `CancellationError` when the calling task is cancelled while it waits, or an
  ///   ``AuthCoordinatorError`` (timed out, user cancelled, refresh loop, signed out, ...).
  @inlinable
  public nonisolated(nonsending) func authModel(
    for key: AccountKey,
    refresh: RefreshPolicy = .ifNeeded,
    timeout: Duration? = nil
  ) async throws -> AuthModel {
    // What is not a hit ends as one in `found`, or throws: the model never comes back as an
    // async call's result, which takes a model-sized temporary in the caller's frame.
    var found: Lookup = if case .ifNeeded = refresh { lookup(key) } else { .miss }
    if !found.isHit {
      // Not a hit: park on the flight the lookup joined, or on the one admission joins or
      // starts, here. A frame of its own for the park (as the entry point had) put a caller
      // that joins a flight past its task's first allocation slab: a kilobyte more per parked
      // caller (docs/benchmarks.md). The ticket comes back in two registers; a deadline of
      // the caller's own, or a forced refresh that waits for the flight to end and asks again
      // (left in `found`), go on in `settleSlowly`.
      if timeout == nil, let (queue, ticket) = try ticket(for: &found, key: key, refresh: refresh) {
        let wake = await withTaskCancellationHandler {
          await withUnsafeContinuation { queue.park(ticket, $0) }
        } onCancel: {
          queue.leave(ticket, .cancelled)
        }
        try found.fill(from: queue, wake)
      } else if !found.isHit {
        try await settleSlowly(&found, key: key, refresh: refresh, timeout: timeout)
      }
    }
    switch consume found {
    case .hit(let model): return model
    case .joined: preconditionFailure("Internal inconsistency: a request settled without a model")
    case .miss: preconditionFailure("Internal inconsistency: a request settled without a model")
    case .retry: preconditionFailure("Internal inconsistency: a request settled without a model")
    }
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

  /// A stream of what happens inside the coordinator. Each access returns a new subscription
  /// that receives the events emitted from then on. Events never contain tokens.
  ///
  /// ```swift
  /// Task { for await event in coordinator.events { logger.info("\(event)") } }
  /// ```
  public var events: AsyncStream<AuthEvent> { broadcaster.subscribe() }

  /// A snapshot of the counters, summed over the account table's stripes. Readable from any
  /// context, including an authorizer's cancellation handler (the coordinator never runs one
  /// while it holds a lock). Each stripe's counters are read atomically, so the balances
  /// between counters hold in every snapshot.
  public var statistics: Statistics {
    var total = Statistics()
    for stripe in table.stripes {
      total.add(stripe.counters.snapshot)
      total.cacheHits += stripe.lock.withLockToRead { stripe.hits }
    }
    total.cacheHits += Int(truncatingIfNeeded: replicaHits.total)
    total.keysInMemory = table.keyCount
    total.serverClockOffset = serverClock.offset
    return total
  }
}

/// Lets the deadline scheduler, created in the initializer, reach the coordinator without
/// keeping it alive.
private final class DueHandler: @unchecked Sendable {
  // Written once in the coordinator's initializer, before the scheduler can fire.
  weak var coordinator: AuthCoordinator?
}

extension AuthCoordinator {
  /// ``Configuration/maximumHold``, or its default: every deadline a flight's hold can span
  /// (the authorization, an interactive authorizer's exchange, the re-read and the save).
  /// Never shorter than every attempt of the silent-refresh policy at the authorizer's longest
  /// refresh (``Authorizer/longestRefresh``), the waits between them, the re-read and the
  /// save: a refresh the server may have answered is awaited, whatever the callers' deadlines
  /// (rule 16).
  static func maximumHold(
    _ configuration: Configuration, interactive: Bool, longestRefresh: Duration? = nil,
    silent: SilentRefreshPolicy = .disabled
  ) -> Duration {
    let store = CoordinatorClock.clamped(
      min(configuration.storeTimeout, configuration.authorizationTimeout))
    let attempts = min(max(silent.maxAttempts, 1), 16)
    let retryWaits = CoordinatorClock.clamped(silent.maxRetryWait) * (attempts - 1)
    let refresh =
      longestRefresh.map {
        CoordinatorClock.clamped($0) * attempts + retryWaits + store * 2
      } ?? .zero
    if let hold = configuration.maximumHold {
      return min(max(hold, refresh, .zero), CoordinatorClock.longestWait)
    }
    let exchange = interactive ? CoordinatorClock.clamped(configuration.exchangeTimeout) : .zero
    return min(
      max(
        CoordinatorClock.clamped(configuration.authorizationTimeout) + exchange + store * 2, refresh
      ),
      CoordinatorClock.longestWait)
  }
}
