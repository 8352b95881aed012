import AuthCoordinator

/// The result the Inside SDK (`ANXInsideService`) hands to its completion block after an
/// account-connect authorization, mapped to an auth code or an error.
///
/// | result code | meaning | outcome |
/// |---|---|---|
/// | `account_open_auth_9000` | authorized | the `auth_code` (with `app_id`) |
/// | `account_open_auth_8000` | failed | `authorization_failed` |
/// | `account_open_auth_6000` | the user cancelled | `user_cancelled` |
/// | `account_open_auth_5000` | timed out, flow interrupted | `abandoned` |
/// | `account_open_auth_4002` | Alipay too old | `alipay_too_old` |
/// | anything else, or none | | `authorization_failed` |
///
/// Only `account_open_auth_9000` is in the vendor guide (its result holds `auth_code` and
/// `app_id`, no `state`); the other codes are inferred. A 9000 without an `auth_code` is a
/// failure too. ``requestID`` is a `state` the result may carry; the guide's results carry none,
/// so use ``InsideAuthCodeProvider``, which matches the completion to its own call.
///
/// ```swift
/// // iOS, in the Inside SDK's completion block started by InsideAuthCodeProvider's starter:
/// completion.complete(result as [AnyHashable: Any]?, error: error)
/// ```
public struct InsideResult: Sendable, Hashable, CustomStringConvertible,
  CustomDebugStringConvertible
{
  /// An Inside SDK result code, as an open, string-backed type.
  public struct Code: StableCode {
    /// The code's wire value, such as `account_open_auth_9000`.
    public var rawValue: String
    /// Creates a code from its wire value.
    ///
    /// - Parameter rawValue: The wire value.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `account_open_auth_9000`: authorized.
    public static let success = Code(rawValue: "account_open_auth_9000")
    /// `account_open_auth_8000`: failed.
    public static let failed = Code(rawValue: "account_open_auth_8000")
    /// `account_open_auth_6000`: the user cancelled.
    public static let userCancelled = Code(rawValue: "account_open_auth_6000")
    /// `account_open_auth_5000`: timed out or interrupted.
    public static let interrupted = Code(rawValue: "account_open_auth_5000")
    /// `account_open_auth_4002`: the installed Alipay is too old.
    public static let alipayTooOld = Code(rawValue: "account_open_auth_4002")

    /// The error code a request fails with, or `nil` for ``success``.
    public var failureCode: AuthCoordinatorError.Code? {
      switch self {
      case .success: return nil
      case .userCancelled: return .userCancelled
      case .interrupted: return .abandoned
      case .alipayTooOld: return .alipayTooOld
      default: return .authorizationFailed
      }
    }
  }

  /// The default key of the result code in the SDK's dictionary; pass the SDK's
  /// `ANXProductConfigResultCodeKey` when you have it.
  public static let defaultCodeKey = "resultCode"
  /// The default key of the result dictionary in the SDK's dictionary; pass the SDK's
  /// `ANXProductConfigResultKey` when you have it.
  public static let defaultResultKey = "result"

  /// The result code, or `nil` when the dictionary carried none.
  public let code: Code?
  /// The `state` the result carries (the request id), if any.
  public let requestID: String?
  /// The `app_id`, if any.
  public let appID: String?
  /// Whether the result carries a non-empty `auth_code`.
  public var hasAuthCode: Bool { authCodeValue != nil }

  let authCodeValue: String?

  /// The auth code on success, or the error the code maps to.
  public var outcome: Result<AuthCode, AuthCoordinatorError> {
    guard let code else {
      return .failure(AuthCoordinatorError(.authorizationFailed, "the Inside result has no code"))
    }
    if let failure = code.failureCode {
      return .failure(
        AuthCoordinatorError(failure, "Inside result \(SafepayCallback.clip(code.rawValue))"))
    }
    guard let authCodeValue else {
      return .failure(
        AuthCoordinatorError(.authorizationFailed, "Inside reported success without an auth_code"))
    }
    return .success(AuthCode(authCodeValue, appID: appID))
  }

  /// Creates a result from its code and its result fields.
  ///
  /// - Parameters:
  ///   - code: The result code, such as `account_open_auth_9000`.
  ///   - fields: The result dictionary (`auth_code`, `app_id`, `state`).
  public init(code: String?, fields: [String: String] = [:]) {
    self.code = code.map { Code(rawValue: SafepayResultStatus.clean($0)) }
    authCodeValue = SafepayCallback.nonEmpty(fields["auth_code"])
    appID = SafepayCallback.nonEmpty(fields["app_id"])
    requestID = SafepayCallback.nonEmpty(fields["state"])
  }

  /// Reads the dictionary the Inside SDK passes to its completion block.
  ///
  /// Liberal reading: when `codeKey` is missing, any string value starting with
  /// `account_open_auth_` is taken as the code; when `resultKey` is missing, any dictionary
  /// value holding `auth_code` or `state` is taken as the result. Non-string values are
  /// ignored, except numbers, which are read as text.
  ///
  /// - Parameters:
  ///   - dictionary: The SDK's result dictionary.
  ///   - codeKey: The key of the result code (`ANXProductConfigResultCodeKey`).
  ///   - resultKey: The key of the result fields (`ANXProductConfigResultKey`).
  public init(
    _ dictionary: [AnyHashable: Any],
    codeKey: String = InsideResult.defaultCodeKey,
    resultKey: String = InsideResult.defaultResultKey
  ) {
    var code = SafepayCallback.text(dictionary[AnyHashable(codeKey)])
    if code == nil {
      code = dictionary.values.lazy.compactMap { $0 as? String }
        .first { $0.hasPrefix("account_open_auth_") }
    }
    var resultObject = dictionary[AnyHashable(resultKey)].flatMap(Self.fields(of:))
    if resultObject == nil {
      resultObject = dictionary.values.lazy.compactMap(Self.fields(of:))
        .first { $0["auth_code"] != nil || $0["state"] != nil }
    }
    self.init(code: code, fields: resultObject ?? [:])
  }

  private static func fields(of value: Any) -> [String: String]? {
    if let strings = value as? [String: String] { return strings }
    guard let object = value as? [AnyHashable: Any] else { return nil }
    var fields: [String: String] = [:]
    for (key, value) in object {
      guard let name = key.base as? String, let text = SafepayCallback.text(value) else {
        continue
      }
      fields[name] = text
    }
    return fields
  }

  /// A summary without the auth code.
  public var description: String {
    let shownCode = code.map { SafepayCallback.clip($0.rawValue) } ?? "none"
    let shownID = requestID.map { SafepayCallback.clip($0) } ?? "none"
    return "InsideResult(\(shownCode), state: \(shownID), auth_code: "
      + "\(hasAuthCode ? "present" : "absent"))"
  }

  /// The same as ``description``.
  public var debugDescription: String { description }
}
