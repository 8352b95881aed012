/// Produces a fresh ``AuthModel`` for an account: the slow path behind every cache miss.
///
/// The coordinator calls an authorizer at most once per key at a time, however many callers
/// wait (and, with a lease, once per key across processes), bounded by
/// ``AuthCoordinator/Configuration/authorizationTimeout``. When the deadline passes, the last
/// waiter leaves, or the account logs out, the coordinator cancels the task that runs
/// ``authorize(_:)`` and discards whatever it returns afterwards: an authorizer should honour
/// cancellation, but nothing breaks if it does not.
///
/// The request carries the model being replaced (``AuthorizationRequest/replacing``, as the
/// store holds it): with its ``AuthModel/refreshToken`` an authorizer does a refresh-token grant.
/// A flight stopped while its authorizer spends a refresh token does not cancel it: the result
/// is stored when it arrives (never returned to the callers that already failed), so a server
/// that rotates refresh tokens never sees one spent twice. An app extension's coordinator
/// (``AuthCoordinator/Configuration/allowsInteraction`` off) asks with
/// ``AuthorizationRequest/allowsInteraction`` `false`: refresh silently or throw an error with
/// code ``AuthCoordinatorError/Code-swift.struct/interactionRequired``.
///
/// An authorizer is **interactive** (``isInteractive``, the default) when it may involve the
/// user, as the Alipay bridge's does by sending the user to the Alipay app. Such an authorizer
/// exchanges the one-time code it brings back inside ``AuthorizationRequest/exchange(_:)``,
/// which moves the flight to its own ``AuthCoordinator/Configuration/exchangeTimeout``, and the
/// refresh-loop guard fails fast rather than send the user away again and again. A service's
/// authorizer (a token endpoint, a signing key) never involves anyone: it says so with
/// `isInteractive` `false`, keeps one deadline
/// (``AuthCoordinator/Configuration/authorizationTimeout``, even inside `exchange`), and the
/// loop guard delays it instead of failing its callers. The "Deadlines" section of the
/// Timeouts, Cancellation and Logout article has the whole picture.
///
/// Under a cross-process lease the coordinator checks the flight's grant once, before it calls
/// `authorize`. An authorizer that sends a second token request in one authorization (a new
/// login after a refused refresh) calls ``AuthorizationRequest/confirmAnotherTokenRequest()``
/// before it, so that the second request, too, leaves only under a live grant.
///
/// ```swift
/// struct ServiceAuthorizer: Authorizer {
///   var isInteractive: Bool { false }
///   func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
///     let token = try await tokenEndpoint.fetch(
///       clientID: request.key.account, refreshToken: request.replacing?.refreshToken)
///     return AuthModel(
///       accessToken: token.accessToken, account: request.key.account,
///       expiresAt: token.expiresAt, refreshToken: token.refreshToken)
///   }
/// }
/// ```
///
/// For an OAuth 2 token endpoint, `OAuth2Authorizer` in the `AuthCoordinatorOAuth2` module does
/// this already.
public protocol Authorizer: Sendable {
  /// Obtains a new model for `request.key`.
  ///
  /// - Parameter request: What to authorize and why, with a unique request id.
  /// - Returns: The new model. Its ``AuthModel/account`` must match the key's.
  /// - Throws: Any error; the coordinator wraps errors that are not an
  ///   ``AuthCoordinatorError`` into one with code
  ///   ``AuthCoordinatorError/Code-swift.struct/authorizationFailed``.
  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel

  /// Whether an authorization may involve the user (another app, a consent page). Default
  /// `true`.
  ///
  /// `false` (a service's authorizer): the flight keeps
  /// ``AuthCoordinator/Configuration/authorizationTimeout`` even inside
  /// ``AuthorizationRequest/exchange(_:)``, and the refresh-loop guard delays an authorization
  /// beyond its limit by ``AuthCoordinator/Configuration/loopBackoff`` (doubling, up to
  /// ``AuthCoordinator/Configuration/maxLoopBackoff``) instead of failing it with
  /// ``AuthCoordinatorError/Code-swift.struct/refreshLoop``.
  var isInteractive: Bool { get }

  /// The silent-refresh policy this authorizer suits (refresh ahead, retries, remembered
  /// failures), used when ``AuthCoordinator/Configuration/silentRefresh`` is `nil`. Default
  /// `nil`: none, the coordinator renews a model when it enters the leeway and hands every
  /// failure to the callers. `OAuth2Authorizer` returns ``SilentRefreshPolicy/recommended``.
  var silentRefresh: SilentRefreshPolicy? { get }

  /// The longest one call of ``authorize(_:)`` can take that spends a refresh token: its
  /// request's own whole-request timeout. Default `nil`: unknown.
  ///
  /// The coordinator keeps the cross-process lease, and waits for a stopped refresh, at
  /// least this long (plus its store deadlines) whatever
  /// ``AuthCoordinator/Configuration/maximumHold`` says, so that a refresh the server may
  /// have answered is always awaited and its rotated token stored, never abandoned while
  /// another flight spends the old one. `OAuth2Authorizer` returns its `refreshTimeout`.
  var longestRefresh: Duration? { get }

  /// Whether the authorizer tries without the user first and announces the moment it turns to
  /// them by calling ``AuthorizationRequest/interact(_:)``. Default `false`.
  ///
  /// `true` (``SilentFirstAuthorizer``): until the announcement, a flight of this interactive
  /// authorizer is treated as a silent one. Its transient failures are retried with back-off
  /// and remembered (``SilentRefreshPolicy``), its terminal ones remembered for
  /// ``SilentRefreshPolicy/failureCooldown``; an error with code
  /// ``AuthCoordinatorError/Code-swift.struct/interactionRequired`` is never remembered (the
  /// next caller that may involve the user gets the bounce).
  var announcesInteraction: Bool { get }

  /// Whether the coordinator calls ``revoke(_:)`` after it signs an account out. Default
  /// `false`.
  ///
  /// `true` (an `OAuth2Authorizer` with a revocation endpoint): after a logout, an unbind or an
  /// ``AuthCoordinator/invalidate(account:)`` has taken effect (memory cleared, the store's
  /// removal done), the coordinator hands each model it cleared to ``revoke(_:)``, once, in the
  /// background, bounded by ``AuthCoordinator/Configuration/revocationTimeout``, and reports the
  /// outcome as ``AuthEvent/signOutRevocation(key:outcome:)``. A sign-out heard from another
  /// process is not revoked again: the process that signed out did it.
  var revokesOnSignOut: Bool { get }

  /// Tells the server that `model`'s tokens are no longer needed (for OAuth 2, RFC 7009
  /// revocation of its refresh token, or its access token without one). Best effort: the
  /// sign-out has already taken effect, and nothing waits for this. The default does nothing.
  ///
  /// - Parameter model: A model the coordinator cleared on a sign-out.
  /// - Throws: An ``AuthCoordinatorError`` when the server did not confirm the revocation; its
  ///   code is reported in the event. It must never carry a token.
  func revoke(_ model: AuthModel) async throws
}

extension Authorizer {
  /// `true`: an authorizer may involve the user unless it says otherwise.
  public var isInteractive: Bool { true }

  /// `nil`: no silent-refresh policy unless the coordinator's configuration sets one.
  public var silentRefresh: SilentRefreshPolicy? { nil }

  /// `nil`: the authorizer does not say how long a refresh may take.
  public var longestRefresh: Duration? { nil }

  /// `false`: an authorizer does not announce when it involves the user unless it says so.
  public var announcesInteraction: Bool { false }

  /// `false`: the coordinator revokes nothing on a sign-out unless the authorizer says so.
  public var revokesOnSignOut: Bool { false }

  /// Does nothing: an authorizer revokes nothing unless it says how.
  ///
  /// - Parameter model: The cleared model (unused).
  public func revoke(_ model: AuthModel) async throws {}
}

/// An ``Authorizer`` made from a closure.
///
/// ```swift
/// let authorizer = ClosureAuthorizer(isInteractive: false) { request in
///   try await backend.fetchModel(for: request.key.account)
/// }
/// ```
public struct ClosureAuthorizer: Authorizer {
  private let body: @Sendable (AuthorizationRequest) async throws -> AuthModel
  /// Whether the closure may involve the user; see ``Authorizer/isInteractive``.
  public let isInteractive: Bool

  /// Creates an authorizer that runs `body` for each authorization.
  ///
  /// - Parameters:
  ///   - isInteractive: Whether `body` may involve the user (see
  ///     ``Authorizer/isInteractive``). Default `true`; pass `false` for a service's token
  ///     call.
  ///   - body: The work that produces a model.
  public init(
    isInteractive: Bool = true,
    _ body: @escaping @Sendable (AuthorizationRequest) async throws -> AuthModel
  ) {
    self.isInteractive = isInteractive
    self.body = body
  }

  /// Runs the closure.
  ///
  /// - Parameter request: What to authorize.
  /// - Returns: The closure's model.
  /// - Throws: What the closure throws.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    try await body(request)
  }
}
