import Foundation

/// Why a call of `alipay.system.oauth.token` failed: the
/// ``/AuthCoordinator/AuthCoordinatorError/underlying`` error of every error that
/// ``AlipayTokenAPI`` throws.
///
/// It never holds a token, an auth code or a signature: the body excerpt is redacted with the
/// request's secrets and every keyed token value replaced.
public struct AlipayTokenAPIError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What the failure means for the caller.
  public enum Classification: String, Sendable, Hashable {
    /// The user must authorize again: the code or the refresh token is invalid, spent or
    /// expired, or the user cancelled the authorization. Thrown as
    /// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired``.
    case needsAuthorization = "needs_authorization"
    /// Retrying later can help: HTTP 5xx or 429, a transport failure or timeout, `isp.*`,
    /// code 20000.
    case transient
    /// The same request fails again until the integrator changes something: a bad signature,
    /// an invalid app id, missing permissions, a malformed reply, an unknown error code.
    case terminal
  }

  /// What the failure means.
  public var classification: Classification
  /// The grant that failed: `authorization_code` or `refresh_token`.
  public var grantType: String
  /// Alipay's gateway code (`code`, such as `40002`), when the reply had an `error_response`.
  public var alipayCode: String?
  /// Alipay's detailed code (`sub_code`, such as `isv.code-invalid`), when the reply had one.
  public var subCode: String?
  /// The reply's HTTP status, when a reply arrived.
  public var httpStatus: Int?
  /// The transport's error code, when no reply arrived.
  public var urlErrorCode: URLError.Code?
  /// A short, redacted excerpt of the reply body, when there was one.
  public var bodyExcerpt: String?
  /// A human-readable reason, free of secrets.
  public var reason: String

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - classification: What the failure means.
  ///   - grantType: The grant that failed.
  ///   - reason: A reason without secrets.
  ///   - alipayCode: Alipay's `code`, if any.
  ///   - subCode: Alipay's `sub_code`, if any.
  ///   - httpStatus: The HTTP status, if a reply arrived.
  ///   - urlErrorCode: The transport error, if none did.
  ///   - bodyExcerpt: A redacted body excerpt, if any.
  public init(
    _ classification: Classification, grantType: String, reason: String,
    alipayCode: String? = nil, subCode: String? = nil, httpStatus: Int? = nil,
    urlErrorCode: URLError.Code? = nil, bodyExcerpt: String? = nil
  ) {
    self.classification = classification
    self.grantType = grantType
    self.reason = reason
    self.alipayCode = alipayCode
    self.subCode = subCode
    self.httpStatus = httpStatus
    self.urlErrorCode = urlErrorCode
    self.bodyExcerpt = bodyExcerpt
  }

  /// `AlipayTokenAPIError(classification, grant): reason [code/sub_code] (HTTP n)`.
  public var description: String {
    var text = "AlipayTokenAPIError(\(classification.rawValue), \(grantType)): \(reason)"
    if alipayCode != nil || subCode != nil {
      text += " [\(alipayCode ?? "-")/\(subCode ?? "-")]"
    }
    if let httpStatus { text += " (HTTP \(httpStatus))" }
    if let urlErrorCode { text += " (URLError \(urlErrorCode.rawValue))" }
    if let bodyExcerpt { text += " body: \(bodyExcerpt)" }
    return text
  }
}
