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
/// An authorizer that obtains a one-time code elsewhere (for example, the Alipay bridge's
/// authorizer, in the `AlipayBridge` module) exchanges it at the integrator's server inside
/// ``AuthorizationRequest/exchange(_:)``, which switches the flight to its own
/// ``AuthCoordinator/Configuration/exchangeTimeout``. Services plug in their own:
///
/// ```swift
/// struct ServiceAuthorizer: Authorizer {
///   func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
///     try await request.exchange { try await myServer.token(for: request.key) }
///   }
/// }
/// ```
public protocol Authorizer: Sendable {
  /// Obtains a new model for `request.key`.
  ///
  /// - Parameter request: What to authorize and why, with a unique request id.
  /// - Returns: The new model. Its `mcUid` should match the key's.
  /// - Throws: Any error; the coordinator wraps errors that are not an
  ///   ``AuthCoordinatorError`` into one with code
  ///   ``AuthCoordinatorError/Code-swift.struct/authorizationFailed``.
  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel
}

/// An ``Authorizer`` made from a closure.
///
/// ```swift
/// let authorizer = ClosureAuthorizer { request in
///   try await backend.fetchModel(for: request.key.mcUid)
/// }
/// ```
public struct ClosureAuthorizer: Authorizer {
  private let body: @Sendable (AuthorizationRequest) async throws -> AuthModel

  /// Creates an authorizer that runs `body` for each authorization.
  ///
  /// - Parameter body: The work that produces a model.
  public init(_ body: @escaping @Sendable (AuthorizationRequest) async throws -> AuthModel) {
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
