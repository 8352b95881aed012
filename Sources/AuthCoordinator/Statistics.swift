extension AuthCoordinator {
  /// A snapshot of the coordinator's counters.
  ///
  /// Flights balance: `flightsStarted == flightsSucceeded + flightsFailed + flightsCancelled +
  /// flightsTimedOut + flightsInProgress` at every snapshot.
  public struct Statistics: Sendable, Hashable {
    /// Requests answered from memory without a flight.
    public var cacheHits = 0
    /// Requests that joined a flight already in progress.
    public var coalescedCallers = 0
    /// Flights started (store loads and authorizations).
    public var flightsStarted = 0
    /// Flights that produced a model.
    public var flightsSucceeded = 0
    /// Flights that failed.
    public var flightsFailed = 0
    /// Flights cancelled by their last waiter leaving or by a sign-out.
    public var flightsCancelled = 0
    /// Flights that ran past their deadline.
    public var flightsTimedOut = 0
    /// Flights in progress now.
    public var flightsInProgress = 0
    /// Calls into the authorizer.
    public var authorizationsStarted = 0
    /// Callers parked on a flight now.
    public var waitingCallers = 0
    /// Callers that left early (cancelled or their own timeout).
    public var callersLeftEarly = 0
    /// Forced refreshes refused by the loop guard (interactive authorizers).
    public var refreshLoopsStopped = 0
    /// Authorizations the loop guard delayed (non-interactive authorizers).
    public var refreshLoopBackoffs = 0
    /// Results that arrived after their flight stopped counting and were discarded.
    public var lateResultsDiscarded = 0
    /// Late results of stopped refreshes that were stored (never served to the callers that
    /// had already failed).
    public var lateResultsSaved = 0
    /// Flights that adopted a model another process (or a stopped flight) stored, instead of
    /// authorizing.
    public var adoptedFromStore = 0
    /// Store operations that failed.
    public var storeFailures = 0
    /// Models served whose save failed and that memory kept, unsaved, for a retry.
    public var unsavedModels = 0
    /// Retries of unsaved models' saves (successful or not).
    public var saveRetries = 0
    /// Leases a flight lost while holding them (taken over, or lapsed after failed renewals).
    public var leasesLost = 0
    /// Holds ended by ``AuthCoordinator/Configuration/maximumHold``, and stopped refreshes
    /// abandoned after it.
    public var holdsEnded = 0
    /// Refreshes ahead of expiry started by cache hits (``SilentRefreshPolicy``).
    public var refreshesAhead = 0
    /// Retries of a silent authorizer's transient failures, within their flights.
    public var retriesScheduled = 0
    /// Answers with a stale model (not expired, inside the leeway) after a transient failure.
    public var staleServed = 0
    /// Cooldowns begun: failures the keys remembered.
    public var cooldownsEntered = 0
    /// Requests failed at once by a cooldown, without a flight.
    public var failedFast = 0
    /// Idle keys evicted from memory.
    public var evictions = 0
    /// How far the token servers' clocks are ahead of this process's (`server − local`), as
    /// estimated from the `Date` headers the authorizer reported
    /// (``AuthorizationRequest/noteServerDate(_:at:)``); `nil` before any.
    public var serverClockOffset: Duration?
    /// Keys held in memory now.
    public var keysInMemory = 0

    /// An all-zero snapshot.
    public init() {}
  }
}

extension AuthCoordinator.Statistics {
  /// Adds every counter of `other` (the stripes' parts of one snapshot).
  mutating func add(_ other: Self) {
    cacheHits += other.cacheHits
    coalescedCallers += other.coalescedCallers
    flightsStarted += other.flightsStarted
    flightsSucceeded += other.flightsSucceeded
    flightsFailed += other.flightsFailed
    flightsCancelled += other.flightsCancelled
    flightsTimedOut += other.flightsTimedOut
    flightsInProgress += other.flightsInProgress
    authorizationsStarted += other.authorizationsStarted
    waitingCallers += other.waitingCallers
    callersLeftEarly += other.callersLeftEarly
    refreshLoopsStopped += other.refreshLoopsStopped
    refreshLoopBackoffs += other.refreshLoopBackoffs
    lateResultsSaved += other.lateResultsSaved
    adoptedFromStore += other.adoptedFromStore
    lateResultsDiscarded += other.lateResultsDiscarded
    storeFailures += other.storeFailures
    unsavedModels += other.unsavedModels
    saveRetries += other.saveRetries
    leasesLost += other.leasesLost
    holdsEnded += other.holdsEnded
    refreshesAhead += other.refreshesAhead
    retriesScheduled += other.retriesScheduled
    staleServed += other.staleServed
    cooldownsEntered += other.cooldownsEntered
    failedFast += other.failedFast
    evictions += other.evictions
    keysInMemory += other.keysInMemory
  }
}
