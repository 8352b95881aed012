/// How a coordinator refreshes without its callers noticing: ahead of expiry, with retries of
/// transient failures, a short memory of failures, and (opt-in) the cached model served while
/// the token endpoint is down.
///
/// A coordinator applies its configuration's ``AuthCoordinator/Configuration/silentRefresh``.
/// By default that is ``authorizersOwn``: the policy the authorizer brings
/// (``Authorizer/silentRefresh``: `OAuth2Authorizer` brings ``recommended``), with any field
/// set on the configuration changed. Without a policy of the authorizer's (a closure
/// authorizer), or with ``disabled``, the coordinator behaves as it always did: a model is
/// renewed when it enters the leeway, a failure is handed to the callers and not remembered.
///
/// ```swift
/// var configuration = AuthCoordinator.Configuration()
/// configuration.silentRefresh.servesStaleOnError = true  // the authorizer's, stale-if-error on
/// configuration.silentRefresh = .recommended  // or a whole policy of your own
/// ```
///
/// With an **interactive** authorizer (``Authorizer/isInteractive``, the Alipay bridge's) a
/// policy never sends the user anywhere: a refresh ahead asks with
/// ``AuthorizationRequest/allowsInteraction`` `false` and reason
/// ``AuthorizationReason/refreshAhead`` (an authorizer that can only bounce declines, and the
/// model is served until the leeway as before), and there are no retries and no remembered
/// failures (a user who cancelled may try again at once).
public struct SilentRefreshPolicy: Sendable, Hashable {
  /// How long before a model's expiry a refresh ahead may begin.
  public enum Window: Sendable, Hashable {
    /// Scaled by the lifetime the model arrived with, as aws-sdk-go-v2's credential cache
    /// does: 5 minutes for a lifetime up to 20 minutes, 15 minutes below 90 minutes, 60 minutes
    /// beyond; never more than half the lifetime.
    case scaledByLifetime
    /// This long before expiry (never more than half the lifetime).
    case fixed(Duration)
  }

  /// The advisory window, or `nil` for no refresh ahead. Default ``Window/scaledByLifetime``.
  ///
  /// Both the window and the leeway are at most half the lifetime a model arrived with, so a
  /// short-lived model's window can fall inside its leeway (a 2-minute token under the default
  /// 60-second ``AuthCoordinator/Configuration/refreshLeeway``, a 4-minute one for some jitter
  /// draws). Its refresh ahead is then due halfway through the life it has before the leeway,
  /// less the same jitter: a 2-minute token is refreshed ahead between 30 and 15 seconds before
  /// its leeway. A ``Window/fixed(_:)`` window no wider than the leeway means no refresh ahead.
  ///
  /// A cache hit inside the window (but outside ``AuthCoordinator/Configuration/refreshLeeway``,
  /// where callers wait for the refresh) returns the cached model at once and starts at most one
  /// background flight for the key, with reason ``AuthorizationReason/refreshAhead``.
  public var refreshAhead: Window? {
    get { values.refreshAhead }
    set {
      values.refreshAhead = newValue
      changed.insert(.refreshAhead)
    }
  }
  /// Which fraction of the window is jitter, from 0 to 1. Default 0.5: each model's refresh
  /// ahead begins at a random point between the whole window and half of it before expiry, so
  /// that replicas and keys holding tokens obtained together do not refresh together.
  public var refreshAheadJitter: Double {
    get { values.refreshAheadJitter }
    set {
      values.refreshAheadJitter = newValue
      changed.insert(.refreshAheadJitter)
    }
  }
  /// How many times one flight calls the authorizer, the first call included, when it fails
  /// transiently (``AuthCoordinatorError/isTransient``: a network error, a 5xx or 429, a timeout
  /// of the request). Default 3; 1 turns retries off. Never retried: terminal errors
  /// (`invalid_grant`, `invalid_client`), and anything from an interactive authorizer.
  public var maxAttempts: Int {
    get { values.maxAttempts }
    set {
      values.maxAttempts = newValue
      changed.insert(.maxAttempts)
    }
  }
  /// The back-off after the first transient failure of a key; each further consecutive one
  /// doubles it, up to ``maxRetryDelay``. Each delay is drawn uniformly between half of it and
  /// all of it. A server's `Retry-After` (``AuthCoordinatorError/retryAfter``, as its thrower
  /// clamped it) lengthens it. After a flight's last attempt, the key remembers the failure for
  /// the next back-off step: requests meanwhile get it at once (or a stale model), so a server
  /// that is down sees one request per step and key. Default 1 second; zero turns every
  /// back-off off (retries follow at once, nothing is remembered).
  public var retryDelay: Duration {
    get { values.retryDelay }
    set {
      values.retryDelay = newValue
      changed.insert(.retryDelay)
    }
  }
  /// The longest back-off. Default 30 seconds.
  public var maxRetryDelay: Duration {
    get { values.maxRetryDelay }
    set {
      values.maxRetryDelay = newValue
      changed.insert(.maxRetryDelay)
    }
  }
  /// The longest back-off a flight waits inside itself, with its callers. A longer one (a
  /// `Retry-After` of minutes, say), or one past the flight's deadline, ends the flight with
  /// the error instead, and the key cools down for the rest of it. Default 5 seconds.
  public var maxRetryWait: Duration {
    get { values.maxRetryWait }
    set {
      values.maxRetryWait = newValue
      changed.insert(.maxRetryWait)
    }
  }
  /// How long a terminal failure of a silent authorizer is remembered: requests meanwhile get
  /// the same error at once, so a storm of callers makes one token request, not one each.
  /// Default 2 seconds; zero turns it off.
  public var failureCooldown: Duration {
    get { values.failureCooldown }
    set {
      values.failureCooldown = newValue
      changed.insert(.failureCooldown)
    }
  }
  /// Whether callers get the cached model when a silent refresh failed transiently and the
  /// model has not yet expired (it is only inside the leeway or the window): with its own
  /// expiry, never a new one, and a ``AuthEvent/staleServed(key:flight:)`` event. An expired
  /// model is never served. Default `false`.
  public var servesStaleOnError: Bool {
    get { values.servesStaleOnError }
    set {
      values.servesStaleOnError = newValue
      changed.insert(.servesStaleOnError)
    }
  }

  /// Creates a policy with the defaults, changing the ones given.
  ///
  /// - Parameters:
  ///   - refreshAhead: See ``refreshAhead``.
  ///   - refreshAheadJitter: See ``refreshAheadJitter``.
  ///   - maxAttempts: See ``maxAttempts``.
  ///   - retryDelay: See ``retryDelay``.
  ///   - maxRetryDelay: See ``maxRetryDelay``.
  ///   - maxRetryWait: See ``maxRetryWait``.
  ///   - failureCooldown: See ``failureCooldown``.
  ///   - servesStaleOnError: See ``servesStaleOnError``.
  public init(
    refreshAhead: Window? = .scaledByLifetime, refreshAheadJitter: Double = 0.5,
    maxAttempts: Int = 3, retryDelay: Duration = .seconds(1),
    maxRetryDelay: Duration = .seconds(30), maxRetryWait: Duration = .seconds(5),
    failureCooldown: Duration = .seconds(2), servesStaleOnError: Bool = false
  ) {
    self.values = Values(
      refreshAhead: refreshAhead, refreshAheadJitter: refreshAheadJitter,
      maxAttempts: maxAttempts, retryDelay: retryDelay, maxRetryDelay: maxRetryDelay,
      maxRetryWait: maxRetryWait, failureCooldown: failureCooldown,
      servesStaleOnError: servesStaleOnError)
    self.inheritsUnchanged = false
  }

  /// The authorizer's own policy (``Authorizer/silentRefresh``), with the fields set on this
  /// value changed: the default of ``AuthCoordinator/Configuration/silentRefresh``.
  ///
  /// ```swift
  /// var configuration = AuthCoordinator.Configuration()
  /// configuration.silentRefresh.servesStaleOnError = true  // the authorizer's, stale-if-error on
  /// ```
  ///
  /// A field not set here is the authorizer's: reading it from this value gives
  /// ``recommended``'s, which is not necessarily the authorizer's. An authorizer without a
  /// policy (a closure authorizer) stands for ``disabled``, with the set fields changed.
  public static let authorizersOwn: SilentRefreshPolicy = {
    var policy = SilentRefreshPolicy()
    policy.inheritsUnchanged = true
    return policy
  }()

  /// Whether this value is ``authorizersOwn``, with or without changed fields.
  public var isAuthorizersOwn: Bool { inheritsUnchanged }

  /// The policy a coordinator applies: this one, or, for ``authorizersOwn``, `authorizers`
  /// (``disabled`` when `nil`) with the fields set on this value changed.
  ///
  /// - Parameter authorizers: The authorizer's own policy, if it has one.
  /// - Returns: A policy that inherits nothing.
  public func resolved(over authorizers: SilentRefreshPolicy?) -> SilentRefreshPolicy {
    guard inheritsUnchanged else { return self }
    var policy = authorizers ?? .disabled
    policy.inheritsUnchanged = false
    policy.values.merge(values, fields: changed)
    return policy
  }

  /// The fields' values.
  var values: Values
  /// Which fields were set after the value was made: for ``authorizersOwn``, the ones that
  /// replace the authorizer's. Not part of the policy's identity.
  var changed: Fields = []
  /// Whether the fields not in `changed` are the authorizer's.
  private var inheritsUnchanged: Bool

  /// Two policies are equal when they inherit alike and apply the same values (which fields
  /// were set afterwards only matters for ``authorizersOwn``).
  ///
  /// - Parameters:
  ///   - lhs: A policy.
  ///   - rhs: Another policy.
  /// - Returns: Whether a coordinator would apply the same policy for both.
  public static func == (lhs: SilentRefreshPolicy, rhs: SilentRefreshPolicy) -> Bool {
    guard lhs.inheritsUnchanged == rhs.inheritsUnchanged else { return false }
    guard lhs.inheritsUnchanged else { return lhs.values == rhs.values }
    return lhs.changed == rhs.changed
      && lhs.values.masked(lhs.changed) == rhs.values.masked(rhs.changed)
  }

  /// Hashes what ``==(_:_:)`` compares.
  ///
  /// - Parameter hasher: The hasher.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(inheritsUnchanged)
    if inheritsUnchanged {
      hasher.combine(changed.rawValue)
      hasher.combine(values.masked(changed))
    } else {
      hasher.combine(values)
    }
  }

  /// Refresh ahead in the lifetime-scaled window, 3 attempts with back-off from 1 second, a
  /// 2-second memory of terminal failures, no stale models.
  public static let recommended = SilentRefreshPolicy()

  /// Nothing silent: no refresh ahead, no retries, no back-off, no remembered failures (the
  /// coordinator's behaviour without a policy). Set it to turn off an authorizer's own policy.
  public static let disabled = SilentRefreshPolicy(
    refreshAhead: nil, maxAttempts: 1, retryDelay: .zero, failureCooldown: .zero)

  /// The advisory window for a model with `lifetime` left when it arrived (before jitter), or
  /// `nil` without refresh ahead.
  ///
  /// ```swift
  /// SilentRefreshPolicy.recommended.window(forLifetime: .seconds(3600))  // 15 minutes
  /// ```
  ///
  /// - Parameter lifetime: How long the model had left when it arrived.
  /// - Returns: How long before expiry its refresh ahead may begin, at most half `lifetime`.
  public func window(forLifetime lifetime: Duration) -> Duration? {
    guard let refreshAhead else { return nil }
    let window: Duration
    switch refreshAhead {
    case .scaledByLifetime:
      if lifetime <= .seconds(20 * 60) {
        window = .seconds(5 * 60)
      } else if lifetime < .seconds(90 * 60) {
        window = .seconds(15 * 60)
      } else {
        window = .seconds(60 * 60)
      }
    case .fixed(let fixed): window = fixed
    }
    return min(window, lifetime / 2)
  }
}
