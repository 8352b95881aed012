import AuthCoordinator

/// The Alipay bridge's own reasons for an ``AuthCoordinator/AuthCoordinatorError``.
///
/// `AuthCoordinatorError.Code` is an open, string-backed type: these codes are defined here, next
/// to the code that produces them, and the core knows nothing of them. The coordinator passes
/// them to its callers untouched. Their raw values are the ones the core defined before the
/// bridge became a module of its own.
extension AuthCoordinatorError.Code {
  /// The user cancelled in Alipay (`account_open_auth_6000`, ResultStatus 6001).
  public static let userCancelled = Self(rawValue: "user_cancelled")
  /// The installed Alipay is too old (`account_open_auth_4002`).
  public static let alipayTooOld = Self(rawValue: "alipay_too_old")
  /// The integrator's server did not turn the auth code into a model.
  public static let exchangeFailed = Self(rawValue: "exchange_failed")
  /// The integrator's server did not refresh the model silently (``HTTPTokenRefresher``) for
  /// another reason than "the user must authorize": it refused the request, or answered
  /// something that is not a model. Transient when the server was unreachable or answered
  /// 429 or 5xx.
  public static let refreshFailed = Self(rawValue: "refresh_failed")
  /// A callback URL could not be parsed or did not belong to a pending request.
  public static let invalidCallback = Self(rawValue: "invalid_callback")
}
