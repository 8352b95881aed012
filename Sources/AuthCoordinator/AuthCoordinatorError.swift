/// The one error type the coordinator throws (besides `CancellationError` for a cancelled
/// caller).
///
/// Match on ``code``: codes are stable strings, so a new code is not a breaking change. A module
/// on top of the coordinator (for example, the Alipay bridge) defines its own codes as static
/// members of an extension of ``Code-swift.struct``. Two errors are equal when their codes are
/// equal. The error that caused it, if any, is kept in ``underlying``.
///
/// ```swift
/// do {
///   let model = try await coordinator.authModel(for: key)
/// } catch let error as AuthCoordinatorError where error.code == .timedOut {
///   // the authorization or the exchange ran out of time
/// }
/// ```
///
/// Messages never contain an access token or an auth code.
public struct AuthCoordinatorError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A stable, machine-readable reason.
  public struct Code: StableCode {
    /// The code's stable name, such as `timed_out`.
    public var rawValue: String
    /// Creates a code from its stable name.
    ///
    /// - Parameter rawValue: The stable name, such as `timed_out`.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The authorization, the exchange, or the caller's own timeout ran out.
    public static let timedOut = Code(rawValue: "timed_out")
    /// The authorizer reported a failure (for example, the Alipay bridge reports an unexpected
    /// result with it).
    public static let authorizationFailed = Code(rawValue: "authorization_failed")
    /// The user came back without completing the authorization, or the flow was interrupted.
    public static let abandoned = Code(rawValue: "abandoned")
    /// The container rejected tokens as fast as they were obtained; the loop guard stopped it.
    public static let refreshLoop = Code(rawValue: "refresh_loop")
    /// The account logged out, unbound or switched while the request waited.
    public static let signedOut = Code(rawValue: "signed_out")
    /// The token store failed.
    public static let storeFailed = Code(rawValue: "store_failed")
    /// The network failed: an authorizer's request did not get through (a `URLError` other
    /// than a cancellation), or Alipay reported a network error (ResultStatus 6002). Retrying
    /// later can help.
    public static let networkError = Code(rawValue: "network_error")
    /// The model can only be obtained interactively, and this coordinator may not interact
    /// (``AuthCoordinator/Configuration/allowsInteraction`` is `false`: an app extension, say).
    /// Open the app, or wait for another process to store a model.
    public static let interactionRequired = Code(rawValue: "interaction_required")
    /// Another process took the key's cross-process lease over while this one authorized, and
    /// stored its own model first (this process's save was refused by the fence), or the
    /// store holds nothing this process may serve: its own result is never served, so a fleet
    /// never serves two token families for one key. Transient: the next request reads what
    /// the new holder stored.
    public static let leaseLost = Code(rawValue: "lease_lost")

    /// Whether an error with this code is transient unless its thrower says otherwise:
    /// `timed_out`, `network_error` and `store_failed` are; every other code, including the codes
    /// other modules define, is terminal by default.
    public var isTransientByDefault: Bool {
      self == .timedOut || self == .networkError || self == .storeFailed
    }
  }

  /// Why the request failed.
  public var code: Code
  /// A human-readable explanation, free of secrets.
  public var message: String
  /// The error that caused this one, if any.
  public var underlying: (any Error & Sendable)?
  /// Whether retrying later can help (a network failure, a server that is down, a deadline), as
  /// opposed to a terminal failure that repeats until something changes (a revoked grant, a
  /// refused client, a user who declined).
  ///
  /// The thrower decides; by default it is the code's
  /// ``Code-swift.struct/isTransientByDefault``. An authorizer marks its own errors by throwing
  /// an `AuthCoordinatorError` made with `transient:`, ``transient(_:_:)`` or ``terminal(_:_:)``,
  /// or an error type that conforms to ``ClassifiedError``. The coordinator never caches a
  /// failure either way: the flag is for the caller deciding whether to retry.
  public var isTransient: Bool
  /// How long the server asked the client to wait before trying again (its `Retry-After`,
  /// clamped by the thrower), or `nil` when it said nothing. `OAuth2Authorizer` sets it for a
  /// 429 or 5xx answer of the token endpoint.
  public var retryAfter: Duration?
  /// The server refused the refresh token of the model being replaced
  /// (``AuthorizationRequest/replacing``): it is revoked, expired or already spent. The
  /// coordinator never sends that refresh token again: the key's model is kept without it, and
  /// the next authorization runs the authorizer's other grant. `OAuth2Authorizer` sets it for an
  /// `invalid_grant` answer to a refresh-token grant. Default `false`.
  public var refusesRefreshToken = false

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - code: The stable reason.
  ///   - message: An explanation without secrets.
  ///   - underlying: The cause, if any.
  ///   - transient: Whether retrying later can help; `nil` (the default) takes the code's
  ///     ``Code-swift.struct/isTransientByDefault``.
  ///   - retryAfter: How long the server asked to wait before a retry, if it said.
  public init(
    _ code: Code, _ message: String = "", underlying: (any Error & Sendable)? = nil,
    transient: Bool? = nil, retryAfter: Duration? = nil
  ) {
    self.code = code
    self.message = message
    self.underlying = underlying
    self.isTransient = transient ?? code.isTransientByDefault
    self.retryAfter = retryAfter
  }

  /// An authorizer's failure that retrying later can help, with code
  /// ``Code-swift.struct/authorizationFailed``.
  ///
  /// ```swift
  /// guard status != 503 else { throw AuthCoordinatorError.transient(nil, "the endpoint is down") }
  /// ```
  ///
  /// - Parameters:
  ///   - underlying: The cause, if any.
  ///   - message: An explanation without secrets.
  /// - Returns: The error.
  public static func transient(
    _ underlying: (any Error & Sendable)?, _ message: String = "the authorizer failed"
  ) -> Self {
    Self(.authorizationFailed, message, underlying: underlying, transient: true)
  }

  /// An authorizer's failure that repeats until something changes, with code
  /// ``Code-swift.struct/authorizationFailed``.
  ///
  /// - Parameters:
  ///   - underlying: The cause, if any.
  ///   - message: An explanation without secrets.
  /// - Returns: The error.
  public static func terminal(
    _ underlying: (any Error & Sendable)?, _ message: String = "the authorizer failed"
  ) -> Self {
    Self(.authorizationFailed, message, underlying: underlying, transient: false)
  }

  /// Equal when the codes are equal.
  ///
  /// - Parameters:
  ///   - lhs: An error.
  ///   - rhs: Another error.
  /// - Returns: `true` when the codes are equal; messages and underlying errors are ignored.
  public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

  /// Hashes the code only, consistent with `==`.
  ///
  /// - Parameter hasher: The hasher to feed.
  public func hash(into hasher: inout Hasher) { hasher.combine(code) }

  /// `AuthCoordinatorError(code): message (underlying: ...)`.
  ///
  /// URLs in the underlying error's description (a failed request's `NSErrorFailingURLKey`,
  /// say) are printed without their user info, query and fragment, where codes and
  /// credentials travel.
  public var description: String {
    var text = "AuthCoordinatorError(\(code.rawValue))"
    if !message.isEmpty { text += ": \(message)" }
    if let underlying {
      text += " (underlying: \(URLRedaction.redactingURLs(in: "\(underlying)")))"
    }
    return text
  }
}

extension AuthCoordinatorError {
  /// Shorthand for a timeout error.
  static func timedOut(_ message: String) -> Self { .init(.timedOut, message) }
  /// The error of a flight deposed after its authorizer answered (``Code-swift.struct/leaseLost``).
  static func leaseLost(_ key: AccountKey) -> Self {
    .init(
      .leaseLost,
      "another process took over the lease of account \(key.account) while this one authorized;"
        + " its result was not stored and is not served", transient: true)
  }
  /// Shorthand for a signed-out error.
  static func signedOut(_ key: AccountKey) -> Self {
    .init(.signedOut, "account \(key.account) signed out while the request waited")
  }
}

/// An error type that says whether retrying later can help.
///
/// When an authorizer throws one (and not an ``AuthCoordinatorError``), the coordinator wraps it
/// into an error with code ``AuthCoordinatorError/Code-swift.struct/authorizationFailed`` whose
/// ``AuthCoordinatorError/isTransient`` is the error's own ``isTransient``.
///
/// ```swift
/// struct BackendDown: ClassifiedError { var isTransient: Bool { true } }
/// ```
public protocol ClassifiedError: Error, Sendable {
  /// Whether retrying later can help.
  var isTransient: Bool { get }
}
