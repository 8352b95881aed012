import AuthCoordinator
import Foundation

/// A silent ``/AuthCoordinator/Authorizer`` over ``AlipayTokenAPI``: the integrator's server
/// refreshes an Alipay user's tokens without the user, and redeems the auth codes the app
/// brings back.
///
/// For each authorization, in this order:
/// 1. an auth code deposited for the key (``AlipayPendingCodes``, by
///    ``AlipayTokenService/signIn(authCode:mcUid:)``) is taken and redeemed: the user just
///    authorized, so a new family starts whatever the stored model holds;
/// 2. otherwise, when the model being replaced holds a refresh token: if its family has ended
///    (``refreshExpiry(of:)`` has passed), the authorizer throws
///    ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired`` without
///    calling Alipay; else it refreshes. A reply for another Alipay user fails terminally (and
///    the spent refresh token is never sent again);
/// 3. otherwise it throws ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired``:
///    the user must authorize.
///
/// The model: ``/AuthCoordinator/AuthModel/uid`` the Alipay `user_id`, the access token, the
/// key's `account`, `expiresAt` the request's time plus `expires_in`, the refresh token, and the
/// family's end in ``/AuthCoordinator/AuthModel/extraInfo`` under ``refreshExpiryKey``.
///
/// A call is never retried here (a refresh token is spent by the request, whatever happens to
/// its answer): the coordinator retries transient failures with its silent-refresh policy.
public struct AlipayTokenAuthorizer: Authorizer {
  /// The ``/AuthCoordinator/AuthModel/extraInfo`` key of the family's end, in seconds since
  /// 1970 written as decimal text: `alipay_refresh_expires_at`.
  public static let refreshExpiryKey = "alipay_refresh_expires_at"

  /// The API client.
  public var api: AlipayTokenAPI
  /// The inbox of auth codes waiting to be redeemed.
  public var pendingCodes: AlipayPendingCodes

  /// Creates an authorizer.
  ///
  /// - Parameters:
  ///   - api: The API client; its ``AlipayTokenAPI/now`` is the clock of the family's end.
  ///   - pendingCodes: The inbox the sign-ins deposit their codes in.
  public init(api: AlipayTokenAPI, pendingCodes: AlipayPendingCodes) {
    self.api = api
    self.pendingCodes = pendingCodes
  }

  /// `false`: the authorizer never involves the user.
  public var isInteractive: Bool { false }

  /// ``/AuthCoordinator/SilentRefreshPolicy/recommended``, as `OAuth2Authorizer` brings.
  public var silentRefresh: SilentRefreshPolicy? { .recommended }

  /// The API's ``AlipayTokenAPI/timeout``: one authorization is at most one request.
  public var longestRefresh: Duration? { api.timeout }

  /// When the refresh family of `model` ends, from its ``refreshExpiryKey`` entry.
  ///
  /// - Parameter model: A model this authorizer made.
  /// - Returns: The end, or `nil` when the model does not say.
  public static func refreshExpiry(of model: AuthModel) -> Date? {
    guard let text = model.extraInfo[refreshExpiryKey], let seconds = Double(text),
      seconds.isFinite
    else { return nil }
    return Date(timeIntervalSince1970: seconds)
  }

  /// Redeems a pending code, refreshes, or says the user must authorize.
  ///
  /// - Parameter request: The authorization.
  /// - Returns: The new model.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError``: code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired`` when the
  ///   user must authorize, and the errors of ``AlipayTokenAPI``.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    if let code = pendingCodes.take(for: request.key) {
      let grant = try await api.redeem(code: code)
      return model(grant, for: request.key)
    }
    guard let replaced = request.replacing, let refreshToken = replaced.refreshToken,
      !refreshToken.isEmpty
    else {
      throw AuthCoordinatorError(
        .interactionRequired,
        "no Alipay authorization for account \(request.key.account): the user must authorize")
    }
    if let end = Self.refreshExpiry(of: replaced), end <= api.now() {
      var error = AuthCoordinatorError(
        .interactionRequired,
        "the Alipay refresh family of account \(request.key.account) ended at \(end): the user "
          + "must authorize again")
      error.refusesRefreshToken = true
      throw error
    }
    let grant = try await api.refresh(refreshToken: refreshToken)
    if !replaced.uid.isEmpty, grant.userID != replaced.uid {
      var error = AuthCoordinatorError(
        .alipayTokenAPIFailed,
        "Alipay answered the refresh of account \(request.key.account) for another user; "
          + "the reply was discarded",
        underlying: AlipayTokenAPIError(
          .terminal, grantType: "refresh_token", reason: "user mismatch"),
        transient: false)
      // The refresh token is spent at Alipay either way.
      error.refusesRefreshToken = true
      throw error
    }
    return model(grant, for: request.key)
  }

  private func model(_ grant: AlipayTokenGrant, for key: AccountKey) -> AuthModel {
    var extraInfo = [
      Self.refreshExpiryKey: String(Int64(grant.refreshExpiresAt.timeIntervalSince1970))
    ]
    if let openID = grant.openID { extraInfo["alipay_open_id"] = openID }
    return AuthModel(
      uid: grant.userID, accessToken: grant.accessToken, mcUid: key.account,
      expiresAt: grant.expiresAt, extraInfo: extraInfo, refreshToken: grant.refreshToken)
  }
}
