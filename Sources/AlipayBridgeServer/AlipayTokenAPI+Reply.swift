import AuthCoordinator
import AuthCoordinatorOAuth2
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// The reply: HTTP status, Alipay's envelopes, and the classification of each documented error.
extension AlipayTokenAPI {
  /// The key of the success envelope.
  static let responseKey = "alipay_system_oauth_token_response"
  /// The key of the error envelope.
  static let errorKey = "error_response"
  /// The longest `Retry-After` an error carries.
  static let maximumRetryAfter: Duration = .seconds(3600)

  /// The `sub_code`s that mean the user must authorize again (documented for this API:
  /// 换取授权访问令牌's business error codes).
  static let needsAuthorizationSubCodes: Set<String> = [
    "isv.code-invalid", "isv.refresh-token-invalid", "isv.refresh-token-time-out",
    "isv.refreshed-token-invalid",
  ]

  /// What an Alipay error means, from its `code` and `sub_code`.
  ///
  /// - `isv.code-invalid`, `isv.refresh-token-invalid`, `isv.refresh-token-time-out`,
  ///   `isv.refreshed-token-invalid`: ``AlipayTokenAPIError/Classification/needsAuthorization``;
  /// - code `20000`, any `isp.*` sub code, `aop.unknow-error`, `ACQ.SYSTEM_ERROR` (with or
  ///   without an `aop.` prefix): ``AlipayTokenAPIError/Classification/transient``;
  /// - everything else, an unknown sub code included: ``AlipayTokenAPIError/Classification/terminal``.
  ///
  /// - Parameters:
  ///   - code: The gateway's `code`, if any.
  ///   - subCode: The `sub_code`, if any.
  /// - Returns: The classification.
  public static func classify(code: String?, subCode: String?)
    -> AlipayTokenAPIError
    .Classification
  {
    if let subCode, needsAuthorizationSubCodes.contains(subCode) { return .needsAuthorization }
    if code == "20000" { return .transient }
    if let subCode {
      if subCode.hasPrefix("isp.") || subCode == "aop.unknow-error"
        || subCode == "ACQ.SYSTEM_ERROR" || subCode == "aop.ACQ.SYSTEM_ERROR"
      {
        return .transient
      }
    }
    return .terminal
  }

  /// The grant in a transport outcome, or the error it means.
  func grantReply(_ outcome: HTTPTransportOutcome, grant: Grant, sentAt: Date) throws
    -> AlipayTokenGrant
  {
    let secrets = [grant.secret]
    switch outcome {
    case .redirectRefused(let status):
      throw failure(
        .terminal, grant: grant, "the gateway answered HTTP \(status), a redirect; not followed",
        status: status)
    case .truncated(let response, _):
      let status = (response as? HTTPURLResponse)?.statusCode
      throw failure(
        status.map(Self.isTransientStatus) == true ? .transient : .terminal, grant: grant,
        "the gateway's reply is larger than \(maxBodySize) bytes", status: status)
    case .complete(let response, let body):
      guard let http = response as? HTTPURLResponse else {
        throw failure(.terminal, grant: grant, "the gateway's reply is not HTTP")
      }
      let status = http.statusCode
      let excerpt = BodyRedaction.excerpt(of: body, secrets: secrets)
      guard (200...299).contains(status) else {
        let transient = Self.isTransientStatus(status)
        let retryAfter =
          transient
          ? RetryAfter.delay(
            http.value(forHTTPHeaderField: "Retry-After"),
            serverDate: http.value(forHTTPHeaderField: "Date"), now: now(),
            limit: Self.maximumRetryAfter) : nil
        throw failure(
          transient ? .transient : .terminal, grant: grant,
          "the gateway answered HTTP \(status)", status: status, excerpt: excerpt,
          retryAfter: retryAfter)
      }
      guard let root = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
        throw failure(
          .terminal, grant: grant, "the gateway's reply is not a JSON object", status: status,
          excerpt: excerpt)
      }
      if let object = root[Self.responseKey] as? [String: Any],
        object["access_token"] != nil || object["code"] == nil
          || JSONValues.text(object["code"]) == "10000"
      {
        return try parseGrant(object, grant: grant, sentAt: sentAt, status: status)
      }
      let rejection = root[Self.errorKey] ?? root[Self.responseKey]
      guard let object = rejection as? [String: Any] else {
        throw failure(
          .terminal, grant: grant,
          "the gateway's reply has neither \(Self.responseKey) nor "
            + "\(Self.errorKey)", status: status, excerpt: excerpt)
      }
      let code = JSONValues.text(object["code"])
      let subCode = JSONValues.text(object["sub_code"])
      let classification = Self.classify(code: code, subCode: subCode)
      let shown = [code, subCode].compactMap { $0 }
        .map { BodyRedaction.redact(String($0.prefix(64)), secrets: secrets) }
        .joined(separator: "/")
      throw failure(
        classification, grant: grant, "Alipay refused the \(grant.grantType) grant: \(shown)",
        status: status, excerpt: excerpt, alipayCode: code, subCode: subCode)
    }
  }

  /// The grant in a success envelope.
  private func parseGrant(
    _ object: [String: Any], grant: Grant, sentAt: Date, status: Int
  ) throws -> AlipayTokenGrant {
    func text(_ key: String) -> String? {
      JSONValues.text(object[key]).flatMap { $0.isEmpty ? nil : $0 }
    }
    func seconds(_ key: String) -> Double? {
      if let number = JSONValues.number(object[key] as Any) { return number }
      return (object[key] as? String).flatMap { Double($0.trimmingCharacters(in: .whitespaces)) }
    }
    let missing =
      ["user_id", "access_token", "refresh_token"].filter { text($0) == nil }
      + ["expires_in", "re_expires_in"].filter {
        guard let value = seconds($0) else { return true }
        return !value.isFinite || value < 0
      }
    guard missing.isEmpty, let userID = text("user_id"), let accessToken = text("access_token"),
      let refreshToken = text("refresh_token"), let expiresIn = seconds("expires_in"),
      let reExpiresIn = seconds("re_expires_in")
    else {
      throw failure(
        .terminal, grant: grant,
        "the gateway's reply lacks a valid \(missing.joined(separator: ", "))", status: status)
    }
    let lifetime = Duration.saturating(seconds: expiresIn)
    let familyLifetime = Duration.saturating(seconds: reExpiresIn)
    return AlipayTokenGrant(
      userID: userID, accessToken: accessToken, expiresIn: lifetime,
      expiresAt: sentAt.addingTimeInterval(lifetime.seconds), refreshToken: refreshToken,
      refreshExpiresAt: sentAt.addingTimeInterval(familyLifetime.seconds),
      openID: text("open_id"))
  }

  static func isTransientStatus(_ status: Int) -> Bool {
    status == 429 || (500...599).contains(status)
  }

  /// The error thrown for a classified failure.
  func failure(
    _ classification: AlipayTokenAPIError.Classification, grant: Grant, _ reason: String,
    status: Int? = nil, excerpt: String? = nil, alipayCode: String? = nil,
    subCode: String? = nil, retryAfter: Duration? = nil
  ) -> AuthCoordinatorError {
    let underlying = AlipayTokenAPIError(
      classification, grantType: grant.grantType, reason: reason, alipayCode: alipayCode,
      subCode: subCode, httpStatus: status, bodyExcerpt: excerpt)
    switch classification {
    case .needsAuthorization:
      var error = AuthCoordinatorError(
        .interactionRequired, reason + "; the user must authorize again",
        underlying: underlying, transient: false)
      if case .refreshToken = grant { error.refusesRefreshToken = true }
      return error
    case .transient:
      return AuthCoordinatorError(
        .alipayTokenAPIFailed, reason, underlying: underlying, transient: true,
        retryAfter: retryAfter)
    case .terminal:
      return AuthCoordinatorError(
        .alipayTokenAPIFailed, reason, underlying: underlying, transient: false)
    }
  }

  /// The error for a request that got no reply.
  static func transportFailure(_ code: URLError.Code, grant: Grant, timeout: Duration)
    -> AuthCoordinatorError
  {
    let reason =
      code == .timedOut
      ? "the \(grant.grantType) request to the gateway timed out after \(timeout)"
      : "the \(grant.grantType) request did not reach the gateway (URLError \(code.rawValue))"
    return AuthCoordinatorError(
      .networkError, reason,
      underlying: AlipayTokenAPIError(
        .transient, grantType: grant.grantType, reason: reason, urlErrorCode: code),
      transient: true)
  }
}
