/// An ``Authorizer`` that tries without the user first, and involves them only when the silent
/// way says it cannot go on: one trip to another app per sign-in, not one per expiry.
///
/// Each authorization first asks ``silent`` (a refresh at the integrator's server, a
/// refresh-token grant). Its answer decides:
/// - a model: served, nobody is bothered;
/// - an error with code ``AuthCoordinatorError/Code-swift.struct/interactionRequired`` (the
///   refresh family ended, the user revoked the authorization, nothing is known of the user):
///   ``interactive`` runs once, inside ``AuthorizationRequest/interact(_:)``, when the request
///   allows interaction; otherwise (a refresh ahead, an app extension) the error is thrown;
/// - any other error (the server is down, it refused the request): thrown, and the user is
///   **not** sent anywhere, since the exchange after a bounce would go through the same server.
///   The coordinator treats it as a silent authorizer's failure: a transient one is retried
///   with back-off and remembered for the next back-off step (``SilentRefreshPolicy``), so an
///   outage makes one request per step, however many callers ask.
///
/// A ``AuthorizationReason/refreshAhead`` flight never allows interaction: it only ever takes
/// the silent path.
///
/// ```swift
/// let authorizer = SilentFirstAuthorizer(
///   silent: HTTPTokenRefresher(endpoint: URL(string: "https://api.example.com/alipay/refresh")!),
///   interactive: AlipayAuthorizer(provider: provider, exchanger: exchanger))
/// let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
/// ```
///
/// The same shape serves OAuth 2: a refresh-token grant as ``silent``, a browser sign-in as
/// ``interactive``.
public struct SilentFirstAuthorizer: Authorizer {
  /// Tried first, for every authorization; must never involve the user.
  public let silent: any Authorizer
  /// Runs when ``silent`` says the user must act and the request allows it.
  public let interactive: any Authorizer

  /// Creates the authorizer.
  ///
  /// - Parameters:
  ///   - silent: The authorizer tried first; it throws an error with code
  ///     ``AuthCoordinatorError/Code-swift.struct/interactionRequired`` when only the user can
  ///     help.
  ///   - interactive: The authorizer that involves the user.
  public init(silent: any Authorizer, interactive: any Authorizer) {
    self.silent = silent
    self.interactive = interactive
  }

  /// `true`: the flight may end up involving the user.
  public var isInteractive: Bool { true }

  /// `true`: the coordinator treats a flight as silent until ``interactive`` begins.
  public var announcesInteraction: Bool { true }

  /// The silent authorizer's policy, or ``SilentRefreshPolicy/recommended`` when it has none:
  /// refresh ahead (silently), retries and remembered failures of the silent stage.
  public var silentRefresh: SilentRefreshPolicy? { silent.silentRefresh ?? .recommended }

  /// The silent authorizer's: only the silent stage spends a refresh token.
  public var longestRefresh: Duration? { silent.longestRefresh }

  /// Whether either stage revokes a signed-out account's tokens (``Authorizer/revokesOnSignOut``).
  public var revokesOnSignOut: Bool { silent.revokesOnSignOut || interactive.revokesOnSignOut }

  /// Revokes through the stage that revokes, the silent one first (it holds the refresh grant).
  ///
  /// - Parameter model: The signed-out account's model.
  /// - Throws: What that stage's ``Authorizer/revoke(_:)`` throws.
  public func revoke(_ model: AuthModel) async throws {
    if silent.revokesOnSignOut {
      try await silent.revoke(model)
    } else if interactive.revokesOnSignOut {
      try await interactive.revoke(model)
    }
  }

  /// Asks ``silent``, then, if it says the user must act and the request allows it,
  /// ``interactive``.
  ///
  /// - Parameter request: The authorization.
  /// - Returns: The model.
  /// - Throws: The silent authorizer's error, unless it was
  ///   ``AuthCoordinatorError/Code-swift.struct/interactionRequired`` and the request allows
  ///   interaction; then what ``interactive`` throws.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    do {
      return try await silent.authorize(request)
    } catch let error as AuthCoordinatorError where error.code == .interactionRequired {
      guard request.allowsInteraction else { throw error }
      try Task.checkCancellation()
      return try await request.interact { try await interactive.authorize(request) }
    }
  }
}
