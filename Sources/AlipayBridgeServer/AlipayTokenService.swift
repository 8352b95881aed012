import AuthCoordinator
import Foundation

/// The integrator's server side of Alipay silent refresh: what its HTTP endpoints call.
///
/// It holds an ``/AuthCoordinator/AuthCoordinator`` over an ``AlipayTokenAuthorizer``: one
/// Alipay call per user at a time however many app requests arrive, and (with a shared store
/// and lease, a `FileTokenStore` and `FileAuthorizationLease` or database-backed ones) one per
/// user across the server's replicas, so a rotated refresh token is never spent twice.
///
/// ```swift
/// let api = AlipayTokenAPI(appID: appID, signer: sign)
/// let service = AlipayTokenService(
///   api: api, scope: "auth_user", store: FileTokenStore(url: storeURL),
///   lease: FileAuthorizationLease(url: leaseURL))
/// // In your HTTP server's route for POST /alipay/token and POST /alipay/refresh:
/// let response = await service.respond(to: AlipayServiceRequest(
///   path: request.path, headers: request.headers, body: request.body))
/// ```
///
/// Tokens are kept per app id, scope and host-app user (Alipay asks for tokens to be stored
/// per appId + user + single scope): ``key(appID:scope:mcUid:)``. The host-app user id
/// (`mc_uid`) is what the app sends and what the key is made of; the model's
/// ``/AuthCoordinator/AuthModel/uid`` is the Alipay user id.
public final class AlipayTokenService: Sendable {
  /// The coordinator every request goes through.
  public let coordinator: AuthCoordinator
  /// The API client.
  public let api: AlipayTokenAPI
  /// The scope the tokens were authorized for (`auth_user`, `auth_base`): part of the key.
  public let scope: String
  /// The inbox of auth codes waiting to be redeemed.
  public let pendingCodes: AlipayPendingCodes

  /// Creates a service.
  ///
  /// - Parameters:
  ///   - api: The API client.
  ///   - scope: The authorization scope the app asks the user for.
  ///   - store: Where models persist: shared by the replicas. In memory by default.
  ///   - lease: The replicas' shared lease, or `nil` for one process.
  ///   - configuration: The coordinator's configuration (its `now` should be the API's).
  public init(
    api: AlipayTokenAPI, scope: String, store: any TokenStore = InMemoryTokenStore(),
    lease: (any AuthorizationLease)? = nil,
    configuration: AuthCoordinator.Configuration = AuthCoordinator.Configuration()
  ) {
    let pendingCodes = AlipayPendingCodes()
    self.api = api
    self.scope = scope
    self.pendingCodes = pendingCodes
    coordinator = AuthCoordinator(
      store: store, lease: lease,
      authorizer: AlipayTokenAuthorizer(api: api, pendingCodes: pendingCodes),
      configuration: configuration)
  }

  /// The key of a host-app user's tokens: `AccountKey(account: "<appID>|<scope>|<mcUid>")`.
  ///
  /// - Parameters:
  ///   - appID: The Alipay application id.
  ///   - scope: The authorization scope.
  ///   - mcUid: The host app's own user id, as the app sends it.
  /// - Returns: The key.
  public static func key(appID: String, scope: String, mcUid: String) -> AccountKey {
    AccountKey(account: "\(appID)|\(scope)|\(mcUid)")
  }

  /// The key of a host-app user's tokens in this service (its app id and scope).
  ///
  /// - Parameter mcUid: The host app's own user id.
  /// - Returns: The key.
  public func key(mcUid: String) -> AccountKey {
    Self.key(appID: api.appID, scope: scope, mcUid: mcUid)
  }

  /// Signs a user in with the auth code the app brought back from Alipay: the code is
  /// deposited for the user's key and redeemed by one forced authorization, exactly once.
  ///
  /// The forced refresh rejects whatever is cached for the key (`.force(rejecting: nil)`), so
  /// the coordinator runs the authorizer even when a model (with a dead refresh token, say) is
  /// stored; the authorizer takes the pending code before anything else. A sign-in that joined
  /// a refresh already calling Alipay (which could not take the code) forces one more flight,
  /// so the code the user just brought back is always the one that answers.
  ///
  /// - Parameters:
  ///   - authCode: The auth code (single use).
  ///   - mcUid: The host app's own user id.
  /// - Returns: The new model.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError``: code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired`` when
  ///   Alipay refused the code, and the errors of ``AlipayTokenAPI``.
  public func signIn(authCode: String, mcUid: String) async throws -> AuthModel {
    let key = key(mcUid: mcUid)
    pendingCodes.deposit(authCode, for: key)
    // A code still waiting when the flight ended was never sent: it must not be redeemed by a
    // later flight on behalf of this failed sign-in.
    defer { pendingCodes.withdraw(authCode, for: key) }
    let model: AuthModel
    do {
      model = try await coordinator.authModel(for: key, refresh: .force(rejecting: nil))
    } catch {
      // The forced request joined a flight that had called the authorizer before the code
      // arrived (a refresh, which failed): the code was never sent; one flight of its own.
      guard pendingCodes.holds(authCode, for: key) else { throw error }
      return try await coordinator.authModel(for: key, refresh: .force(rejecting: nil))
    }
    // The same, when that refresh succeeded: its model is the old family's, and the user just
    // authorized (perhaps another Alipay account). The code starts the new family.
    guard pendingCodes.holds(authCode, for: key) else { return model }
    return try await coordinator.authModel(for: key, refresh: .force(rejecting: model.accessToken))
  }

  /// Forgets a user's Alipay authorization on this server (and, through the shared store and
  /// lease, on every replica): the stored model and its refresh token are removed, a refresh in
  /// flight cannot bring them back, and the next ``refresh(mcUid:rejecting:)`` says the user
  /// must authorize.
  ///
  /// Call it when the app's user unbinds Alipay (the app's
  /// `accountStatusChanged(.unbind(mcUid:))`): otherwise the app's next silent refresh would
  /// connect the account again without the user. Whether a logout of the host app should
  /// forget it too is the integrator's choice: if it does not, the same user signing in again
  /// gets Alipay's login state without a bounce.
  ///
  /// - Parameter mcUid: The host app's own user id.
  public func signOut(mcUid: String) async {
    await coordinator.invalidate(account: key(mcUid: mcUid).account)
  }

  /// The user's current model: the cached one while it is valid, otherwise one refresh for
  /// every concurrent caller (and, with a shared lease, every replica).
  ///
  /// - Parameters:
  ///   - mcUid: The host app's own user id.
  ///   - rejecting: The access token the app's caller rejected, if any: a model holding it is
  ///     not served again.
  /// - Returns: A valid model.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError``: code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired`` when
  ///   the user must authorize, and the errors of ``AlipayTokenAPI``.
  public func refresh(mcUid: String, rejecting: String? = nil) async throws -> AuthModel {
    let key = key(mcUid: mcUid)
    guard let rejecting, !rejecting.isEmpty else {
      return try await coordinator.authModel(for: key)
    }
    return try await coordinator.authModel(for: key, refresh: .force(rejecting: rejecting))
  }
}
