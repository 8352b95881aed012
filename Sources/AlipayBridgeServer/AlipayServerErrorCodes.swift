import AuthCoordinator

/// The Alipay server side's own reason for an ``/AuthCoordinator/AuthCoordinatorError``.
///
/// `AuthCoordinatorError.Code` is an open, string-backed type: this code is defined here, next
/// to the code that produces it, as the Alipay bridge defines its own.
extension AuthCoordinatorError.Code {
  /// `alipay.system.oauth.token` refused the request for a reason the user cannot fix by
  /// authorizing again: a bad signature, an invalid app id, missing permissions, a reply that
  /// is not what the API documents, a user id that changed across a refresh, or an error code
  /// this package does not know. Also the code of a transient failure of the API (HTTP 5xx or
  /// 429, `isp.*`, code 20000), which then has ``/AuthCoordinator/AuthCoordinatorError/isTransient`` `true`.
  /// The ``/AuthCoordinator/AuthCoordinatorError/underlying`` error is an ``AlipayTokenAPIError``.
  public static let alipayTokenAPIFailed = Self(rawValue: "alipay_token_api_failed")
}
