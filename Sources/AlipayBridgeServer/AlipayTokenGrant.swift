import Foundation

/// What `alipay.system.oauth.token` granted: the tokens of one user and when they end.
///
/// The two lifetimes are turned into absolute dates when the request is sent (on
/// ``AlipayTokenAPI/now``), so a grant read later still says when its tokens end.
///
/// Its `description` never shows a token.
public struct AlipayTokenGrant: Sendable, Hashable, CustomStringConvertible {
  /// The Alipay user id (`user_id`; a string or a number in the reply, kept as text).
  public var userID: String
  /// The access token (`access_token`).
  public var accessToken: String
  /// The access token's lifetime as the reply stated it (`expires_in`).
  public var expiresIn: Duration
  /// When the access token ends: the request's time plus ``expiresIn``.
  public var expiresAt: Date
  /// The refresh token (`refresh_token`). Never sent to the app.
  public var refreshToken: String
  /// When the refresh token, and with it the whole refresh family, ends: the request's time
  /// plus the reply's `re_expires_in`. A refresh does not move it (Alipay's `re_expires_in`
  /// shrinks), so after it the user must authorize again.
  public var refreshExpiresAt: Date
  /// The `open_id` the reply carried, if any (Alipay's newer per-app user id).
  public var openID: String?

  /// Creates a grant.
  ///
  /// - Parameters:
  ///   - userID: The Alipay user id.
  ///   - accessToken: The access token.
  ///   - expiresIn: The access token's lifetime.
  ///   - expiresAt: When the access token ends.
  ///   - refreshToken: The refresh token.
  ///   - refreshExpiresAt: When the refresh family ends.
  ///   - openID: The `open_id`, if any.
  public init(
    userID: String, accessToken: String, expiresIn: Duration, expiresAt: Date,
    refreshToken: String, refreshExpiresAt: Date, openID: String? = nil
  ) {
    self.userID = userID
    self.accessToken = accessToken
    self.expiresIn = expiresIn
    self.expiresAt = expiresAt
    self.refreshToken = refreshToken
    self.refreshExpiresAt = refreshExpiresAt
    self.openID = openID
  }

  /// The user id and the two ends; the tokens appear only as their lengths.
  public var description: String {
    "AlipayTokenGrant(userID: \(userID), accessToken: <redacted \(accessToken.utf8.count) bytes>, "
      + "expiresAt: \(expiresAt), refreshToken: <redacted \(refreshToken.utf8.count) bytes>, "
      + "refreshExpiresAt: \(refreshExpiresAt))"
  }
}
