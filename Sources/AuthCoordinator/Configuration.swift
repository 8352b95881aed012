import Foundation

extension AuthCoordinator {
  /// What a flight does when its last waiter leaves (by cancellation or its own timeout).
  public enum AbandonPolicy: Sendable, Hashable {
    /// Cancel the authorizer and forget the flight (the default).
    case cancel
    /// Let the authorizer finish and cache its model for the next caller.
    case finishAndCache
  }

  /// The coordinator's settings, with documented defaults.
  ///
  /// ```swift
  /// var configuration = AuthCoordinator.Configuration()
  /// configuration.authorizationTimeout = .seconds(120)
  /// configuration.maxForcedAuthorizations = 2
  /// ```
  public struct Configuration: Sendable {
    /// How long an authorization may take, counted from the call into the authorizer (or from
    /// the start of the wait for another process's authorization). Default 5 minutes: an
    /// interactive authorizer's user may be reading a consent page; a service sets a few
    /// seconds. Any length is accepted: one beyond about a century (`.seconds(Int64.max)`, say)
    /// means "no timeout" and is clamped.
    ///
    /// A non-interactive authorizer (``Authorizer/isInteractive`` `false`) is bounded by this
    /// deadline alone, from start to end.
    public var authorizationTimeout: Duration = .seconds(300)
    /// How long an interactive authorizer's code exchange may take, counted from
    /// ``AuthorizationRequest/exchange(_:)``, which replaces ``authorizationTimeout`` from that
    /// moment (the user is back; only the integrator's server is left). Default 30 seconds.
    /// Not used for a non-interactive authorizer (``Authorizer/isInteractive`` `false`).
    public var exchangeTimeout: Duration = .seconds(30)
    /// A model counts as expired this long before its `expiresAt`. Default 60 seconds.
    ///
    /// A model that arrives with a lifetime shorter than twice the leeway gets half its
    /// lifetime as its leeway instead, so that it is served at all (under a
    /// ``SilentRefreshPolicy`` it is still refreshed ahead, halfway through the life it has
    /// before that leeway); renewing such a model (one
    /// that arrived with a lifetime no longer than the leeway) counts for the refresh-loop guard
    /// (``maxForcedAuthorizations``). A service whose tokens live seconds sets a leeway below
    /// their lifetime.
    public var refreshLeeway: Duration = .seconds(60)
    /// How many authorizations started by forced refreshes of one key (or renewals of tokens
    /// that live shorter than the leeway) are allowed within ``loopWindow``. Beyond it, an
    /// interactive authorizer's next one fails fast with
    /// ``AuthCoordinatorError/Code-swift.struct/refreshLoop`` (the user is not sent away again),
    /// and a non-interactive one's is delayed by ``loopBackoff``. Default 3.
    public var maxForcedAuthorizations: Int = 3
    /// The sliding window of the refresh-loop guard, on ``clock``. Default 60 seconds.
    public var loopWindow: Duration = .seconds(60)
    /// How long a non-interactive authorizer's first authorization beyond
    /// ``maxForcedAuthorizations`` waits before it starts; each further one in the window waits
    /// twice as long as the one before, up to ``maxLoopBackoff``. The callers wait with it
    /// (their own timeouts and cancellation apply; the authorization deadline starts after the
    /// wait). Default 1 second.
    public var loopBackoff: Duration = .seconds(1)
    /// The longest wait of the loop guard's back-off. Default 30 seconds.
    public var maxLoopBackoff: Duration = .seconds(30)
    /// How many idle keys (no flight in progress) stay in memory; beyond it the least recently
    /// used are evicted. Their models stay in the store. Default 10,000.
    public var maxIdleKeys: Int = 10_000
    /// What happens to a flight whose last waiter left. Default ``AbandonPolicy/cancel``.
    public var whenAbandoned: AbandonPolicy = .cancel
    /// How long one store operation (a load, a save, a logout's removal) may take before the
    /// coordinator stops waiting for it; never longer than ``authorizationTimeout``. Default
    /// 10 seconds.
    ///
    /// A load that runs out fails its flight with
    /// ``AuthCoordinatorError/Code-swift.struct/storeFailed`` (nothing is authorized); a save
    /// that runs out still serves and caches the model (the save goes on); a logout returns with
    /// its memory cleared and its removal going on in the background, ordered before any later
    /// load of that user. Each is reported as a `storeFailed` event.
    public var storeTimeout: Duration = .seconds(10)
    /// How long the revocation of a signed-out account's tokens may take
    /// (``Authorizer/revokesOnSignOut``). Default 10 seconds. It runs in the background after
    /// the sign-out took effect and delays nothing; when it passes, the revocation is cancelled
    /// and reported as failed with ``AuthCoordinatorError/Code-swift.struct/timedOut``.
    public var revocationTimeout: Duration = .seconds(10)
    /// How long a cross-process lease (see ``AuthCoordinator/init(store:lease:authorizer:configuration:onAccountStatusChange:)``)
    /// lasts unless renewed. The holder renews it every third of this while it authorizes; a
    /// holder that died is taken over at most this long after its last renewal. Default 15
    /// seconds.
    public var leaseTimeToLive: Duration = .seconds(15)
    /// The longest a flight holds the cross-process lease, and the longest a stopped refresh
    /// keeps later flights of its key waiting, however long its authorizer takes. After it, the
    /// holder stops renewing and gives the lease up (a `leaseHoldEnded` event), and a stopped
    /// refresh is abandoned (a `refreshAbandoned` event; its result, if it ever arrives, is
    /// discarded), so a hung authorizer blocks the key in no process for longer. `nil` (the
    /// default) derives it from the deadlines: ``authorizationTimeout`` plus ``exchangeTimeout``
    /// (for an interactive authorizer) plus twice ``storeTimeout`` (the re-read and the save).
    ///
    /// A refresh abandoned this way may still have been carried out by the server: a server
    /// that rotates refresh tokens without a grace period for reuse then revokes the family at
    /// the next refresh, and the user authorizes anew. Set it above the longest refresh your
    /// token endpoint can take.
    public var maximumHold: Duration? = nil
    /// How long after a failed save the coordinator tries it again; each further failure
    /// doubles the delay, up to ``maxSaveRetryDelay``. The model is served and kept in memory,
    /// marked unsaved, meanwhile. Default 1 second.
    public var saveRetryDelay: Duration = .seconds(1)
    /// The longest delay between two retries of a failed save. Default 30 seconds.
    public var maxSaveRetryDelay: Duration = .seconds(30)
    /// Whether this coordinator may start an interactive authorization. Set it to `false` in an
    /// app extension or widget, which cannot send the user to another app: the coordinator
    /// then adopts what another process stored, and its authorizer gets requests with
    /// ``AuthorizationRequest/allowsInteraction`` `false` (a silent refresh, or an error with
    /// code ``AuthCoordinatorError/Code-swift.struct/interactionRequired``). Default `true`.
    public var allowsInteraction = true
    /// Refresh ahead of expiry, retries of transient failures, remembered failures and
    /// stale-if-error (see ``SilentRefreshPolicy``). The default,
    /// ``SilentRefreshPolicy/authorizersOwn``, takes the authorizer's own
    /// (``Authorizer/silentRefresh``; `OAuth2Authorizer` brings
    /// ``SilentRefreshPolicy/recommended``, a closure authorizer none), with the fields you set
    /// here changed: `configuration.silentRefresh.servesStaleOnError = true` turns stale-if-error
    /// on in the authorizer's policy. Set a whole policy to replace the authorizer's, and
    /// ``SilentRefreshPolicy/disabled`` to turn it off.
    public var silentRefresh: SilentRefreshPolicy = .authorizersOwn
    /// The source of the silent-refresh policy's jitter: a number in `0..<1`. The default is a
    /// fast generator seeded once from the system's (jitter needs no cryptographic strength,
    /// and the system's costs a system call per draw on Linux); tests pin it.
    public var random: @Sendable () -> Double = JitterSource.next
    /// The clock of every deadline, window and grace period. Default `ContinuousClock()`.
    public var clock: any Clock<Duration> = ContinuousClock()
    /// The wall-clock source that ``AuthModel/expiresAt`` is compared with. Default `Date()`.
    /// Tests tie it to their manual clock.
    public var now: @Sendable () -> Date = { Date() }

    /// Creates a configuration with the defaults, changing the ones given.
    ///
    /// ```swift
    /// let configuration = AuthCoordinator.Configuration(
    ///   authorizationTimeout: .seconds(2), maxForcedAuthorizations: 5)
    /// ```
    ///
    /// - Parameters:
    ///   - authorizationTimeout: See ``authorizationTimeout``.
    ///   - exchangeTimeout: See ``exchangeTimeout``.
    ///   - refreshLeeway: See ``refreshLeeway``.
    ///   - maxForcedAuthorizations: See ``maxForcedAuthorizations``.
    ///   - loopWindow: See ``loopWindow``.
    ///   - loopBackoff: See ``loopBackoff``.
    ///   - maxLoopBackoff: See ``maxLoopBackoff``.
    ///   - maxIdleKeys: See ``maxIdleKeys``.
    ///   - whenAbandoned: See ``whenAbandoned``.
    ///   - storeTimeout: See ``storeTimeout``.
    ///   - leaseTimeToLive: See ``leaseTimeToLive``.
    ///   - maximumHold: See ``maximumHold``.
    ///   - saveRetryDelay: See ``saveRetryDelay``.
    ///   - maxSaveRetryDelay: See ``maxSaveRetryDelay``.
    ///   - allowsInteraction: See ``allowsInteraction``.
    ///   - silentRefresh: See ``silentRefresh``.
    ///   - clock: See ``clock``.
    ///   - now: See ``now``.
    public init(
      authorizationTimeout: Duration = .seconds(300),
      exchangeTimeout: Duration = .seconds(30),
      refreshLeeway: Duration = .seconds(60),
      maxForcedAuthorizations: Int = 3,
      loopWindow: Duration = .seconds(60),
      loopBackoff: Duration = .seconds(1),
      maxLoopBackoff: Duration = .seconds(30),
      maxIdleKeys: Int = 10_000,
      whenAbandoned: AbandonPolicy = .cancel,
      storeTimeout: Duration = .seconds(10),
      leaseTimeToLive: Duration = .seconds(15),
      maximumHold: Duration? = nil,
      saveRetryDelay: Duration = .seconds(1),
      maxSaveRetryDelay: Duration = .seconds(30),
      allowsInteraction: Bool = true,
      silentRefresh: SilentRefreshPolicy = .authorizersOwn,
      clock: any Clock<Duration> = ContinuousClock(),
      now: @escaping @Sendable () -> Date = { Date() }
    ) {
      self.authorizationTimeout = authorizationTimeout
      self.exchangeTimeout = exchangeTimeout
      self.refreshLeeway = refreshLeeway
      self.maxForcedAuthorizations = maxForcedAuthorizations
      self.loopWindow = loopWindow
      self.loopBackoff = loopBackoff
      self.maxLoopBackoff = maxLoopBackoff
      self.maxIdleKeys = maxIdleKeys
      self.whenAbandoned = whenAbandoned
      self.storeTimeout = storeTimeout
      self.leaseTimeToLive = leaseTimeToLive
      self.maximumHold = maximumHold
      self.saveRetryDelay = saveRetryDelay
      self.maxSaveRetryDelay = maxSaveRetryDelay
      self.allowsInteraction = allowsInteraction
      self.silentRefresh = silentRefresh
      self.clock = clock
      self.now = now
    }
  }
}
