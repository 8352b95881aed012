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
    /// How long an authorization may take, counted from the call into the authorizer.
    /// Default 5 minutes: the user may be reading Alipay's consent page. Any length is accepted:
    /// one beyond about a century (`.seconds(Int64.max)`, say) means "no timeout" and is clamped.
    public var authorizationTimeout: Duration = .seconds(300)
    /// How long the auth-code exchange may take, counted from
    /// ``AuthorizationRequest/exchange(_:)``. Default 30 seconds.
    public var exchangeTimeout: Duration = .seconds(30)
    /// A model counts as expired this long before its `expiresAt`. Default 60 seconds.
    public var refreshLeeway: Duration = .seconds(60)
    /// How many authorizations started by forced refreshes of one key are allowed within
    /// ``loopWindow``; the next one fails fast with
    /// ``AuthCoordinatorError/Code-swift.struct/refreshLoop``. Default 3.
    public var maxForcedAuthorizations: Int = 3
    /// The sliding window of the refresh-loop guard, on ``clock``. Default 60 seconds.
    public var loopWindow: Duration = .seconds(60)
    /// How many idle keys (no flight in progress) stay in memory; beyond it the least recently
    /// used are evicted. Their models stay in the store. Default 10,000.
    public var maxIdleKeys: Int = 10_000
    /// What happens to a flight whose last waiter left. Default ``AbandonPolicy/cancel``.
    public var whenAbandoned: AbandonPolicy = .cancel
    /// No longer used: a logout removes every mode of the user from the store through
    /// ``TokenStore/removeModels(forMcUid:)``, whether the coordinator saw the mode or not.
    @available(*, deprecated, message: "logout removes every mode of the user; nothing to list")
    public var accountModes: [AuthMode] = [.platformOnly]
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
    /// How long a cross-process lease (see ``AuthCoordinator/init(store:lease:authorizer:configuration:onAccountStatusChange:)``)
    /// lasts unless renewed. The holder renews it every third of this while it authorizes; a
    /// holder that died is taken over at most this long after its last renewal. Default 15
    /// seconds.
    public var leaseTimeToLive: Duration = .seconds(15)
    /// Whether this coordinator may start an interactive authorization. Set it to `false` in an
    /// app extension or widget, which cannot send the user to another app: the coordinator
    /// then adopts what another process stored, and its authorizer gets requests with
    /// ``AuthorizationRequest/allowsInteraction`` `false` (a silent refresh, or an error with
    /// code ``AuthCoordinatorError/Code-swift.struct/interactionRequired``). Default `true`.
    public var allowsInteraction = true
    /// The clock of every deadline, window and grace period. Default `ContinuousClock()`.
    public var clock: any Clock<Duration> = ContinuousClock()
    /// The wall-clock source that ``AuthModel/expiresAt`` is compared with. Default `Date()`.
    /// Tests tie it to their manual clock.
    public var now: @Sendable () -> Date = { Date() }

    /// Creates a configuration with the defaults, changing the ones given.
    ///
    /// - Parameters:
    ///   - authorizationTimeout: See ``authorizationTimeout``.
    ///   - exchangeTimeout: See ``exchangeTimeout``.
    ///   - refreshLeeway: See ``refreshLeeway``.
    public init(
      authorizationTimeout: Duration = .seconds(300),
      exchangeTimeout: Duration = .seconds(30),
      refreshLeeway: Duration = .seconds(60)
    ) {
      self.authorizationTimeout = authorizationTimeout
      self.exchangeTimeout = exchangeTimeout
      self.refreshLeeway = refreshLeeway
    }
  }
}
