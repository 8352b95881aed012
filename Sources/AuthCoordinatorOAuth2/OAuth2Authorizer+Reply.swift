import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// The token endpoint's reply: transport outcome, status, size, and the JSON of RFC 6749 §5.1
// (success) or §5.2 (error).
extension OAuth2Authorizer {
  /// When the request was sent (on ``now``), and the coordinator's estimate of the server's
  /// clock, which the reply's `Date` header feeds.
  struct ReplyClock {
    var sentAt: Date
    var request: AuthorizationRequest
  }

  func model(
    from outcome: BoundedDataTask.Outcome, form: TokenForm, key: AccountKey, secrets: [String],
    clock: ReplyClock
  ) throws -> AuthModel {
    let grant = form.name
    switch outcome {
    case .failed(let urlCode) where urlCode == .timedOut:
      throw AuthCoordinatorError(
        .networkError,
        "the \(grant) request to the token endpoint timed out after \(timeout(for: form))",
        underlying: URLError(urlCode))
    case .failed(let urlCode):
      throw AuthCoordinatorError(
        .networkError,
        "the \(grant) request did not reach the token endpoint (URLError \(urlCode.rawValue))",
        underlying: URLError(urlCode))
    case .redirectRefused(let status):
      throw Self.endpointError(
        "the token endpoint answered HTTP \(status), a redirect; it was not followed",
        transient: false)
    case .tooLarge(let response, _):
      let status = (response as? HTTPURLResponse)?.statusCode
      throw Self.endpointError(
        "the token endpoint's reply\(status.map { " (HTTP \($0))" } ?? "") is larger than "
          + "\(maxBodySize) bytes; reading stopped there",
        transient: status.map(Self.isTransientStatus) ?? false)
    case .complete(let response, let body):
      guard let http = response as? HTTPURLResponse else {
        throw Self.endpointError("the token endpoint's reply is not HTTP", transient: false)
      }
      let status = http.statusCode
      // The server's clock, for the coordinator's estimate of its offset.
      if let header = http.value(forHTTPHeaderField: "Date"),
        let serverDate = RetryAfter.httpDate(header)
      {
        clock.request.noteServerDate(serverDate, at: now())
      }
      // A 429 or 5xx may say when to come back: the error carries it.
      let retryAfter =
        Self.isTransientStatus(status)
        ? RetryAfter.delay(
          http.value(forHTTPHeaderField: "Retry-After"),
          serverDate: http.value(forHTTPHeaderField: "Date"), now: now(),
          limit: Self.maximumRetryAfter) : nil
      do {
        return try model(
          from: http, body: body, form: form, key: key, secrets: secrets, clock: clock)
      } catch var error as AuthCoordinatorError {
        error.retryAfter = retryAfter
        throw error
      }
    }
  }

  /// The longest `Retry-After` an error carries: a server asking for more is taken to mean an
  /// hour.
  static let maximumRetryAfter: Duration = .seconds(3600)

  /// The model in an HTTP reply, or the error it says.
  private func model(
    from http: HTTPURLResponse, body: Data, form: TokenForm, key: AccountKey, secrets: [String],
    clock: ReplyClock
  ) throws -> AuthModel {
    let grant = form.name
    let status = http.statusCode
    if (300...399).contains(status) {
      throw Self.endpointError(
        "the token endpoint answered HTTP \(status), a redirect; it was not followed",
        transient: false)
    }
    if let final = http.url, !RedirectPolicy.sameOrigin(tokenEndpoint, final) {
      throw Self.endpointError(
        "the token endpoint's reply came from another origin", transient: false)
    }
    let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
    if let object, let error = object["error"] as? String,
      !(200...299).contains(status) || object["access_token"] == nil
    {
      throw Self.refusal(
        error, object["error_description"], status: status, grant: grant,
        secrets: secrets, assertion: clientAuthentication.isAssertion,
        refusedInput: form.refusedInput)
    }
    guard (200...299).contains(status) else {
      throw Self.endpointError(
        "the token endpoint answered the \(grant) request with HTTP \(status) and no OAuth 2 "
          + "error", transient: Self.isTransientStatus(status))
    }
    guard let object else {
      throw Self.endpointError(
        "the token endpoint's reply to the \(grant) request is not a JSON object",
        transient: false)
    }
    return try model(from: object, form: form, key: key, clock: clock)
  }

  func model(
    from reply: [String: Any], form: TokenForm, key: AccountKey, clock: ReplyClock
  ) throws -> AuthModel {
    guard let accessToken = reply["access_token"] as? String, !accessToken.isEmpty else {
      throw Self.endpointError(
        "the token endpoint's reply has no access_token (or an empty one)", transient: false)
    }
    var extraInfo: [String: String] = [:]
    if let tokenType = reply["token_type"] {
      // RFC 8693 §2.2.1: a token exchange that issued something else than an access token
      // (an ID token, a JWT) says `N_A`.
      let notApplicable: Bool
      if case .tokenExchange = form {
        notApplicable = (tokenType as? String) == "N_A"
      } else {
        notApplicable = false
      }
      guard let type = tokenType as? String, type.lowercased() == "bearer" || notApplicable else {
        let shown = (tokenType as? String).map { Sanitizer.clean($0, maxLength: 32) } ?? "?"
        throw Self.endpointError(
          "the token endpoint issued a token of type \"\(shown)\"; only Bearer is supported",
          transient: false)
      }
      extraInfo["token_type"] = type
    }
    if case .tokenExchange(let exchange) = form,
      let issued = try Self.issuedTokenType(reply, for: exchange)
    {
      extraInfo["issued_token_type"] = issued
    }
    if let scope = reply["scope"] as? String {
      extraInfo["scope"] = scope
      // A key's mode asked for these scopes: a token without all of them is not its token.
      if let missing = keyedRequest?.missingScopes(granted: scope), !missing.isEmpty {
        var error = AuthCoordinatorError(
          .scopeNotGranted,
          "the token endpoint granted the \(form.name) request the scope \""
            + Sanitizer.clean(scope, maxLength: 200) + "\", without "
            + Sanitizer.clean(missing.joined(separator: " "), maxLength: 200)
            + ": the token is not served", transient: false)
        // A refresh spent the refresh token it sent: it is never sent again.
        if case .refresh = form { error.refusesRefreshToken = true }
        throw error
      }
    }
    var expiresAt: Date?
    if let value = reply["expires_in"], !(value is NSNull) {
      guard let seconds = Self.seconds(value), seconds.isFinite, seconds >= 0 else {
        throw Self.endpointError(
          "the token endpoint's reply has an expires_in that is not a number of seconds",
          transient: false)
      }
      // A lifetime beyond a century (1e300, say) is cut to one, so the model stays storable.
      // It counts from the request, on this clock: the server's skew does not matter.
      expiresAt = clock.sentAt.addingTimeInterval(Duration.saturating(seconds: seconds).seconds)
    } else if let value = reply["expires_at"], !(value is NSNull) {
      // An absolute expiry (seconds since 1970) is on the server's clock: corrected by the
      // coordinator's estimate of its offset.
      guard let seconds = Self.seconds(value), seconds.isFinite, seconds >= 0,
        seconds < 4_102_444_800  // 2100-01-01
      else {
        throw Self.endpointError(
          "the token endpoint's reply has an expires_at that is not a time in seconds since 1970",
          transient: false)
      }
      expiresAt = clock.request.localDate(
        forServerDate: Date(timeIntervalSince1970: seconds))
    }
    var refreshToken = (reply["refresh_token"] as? String).flatMap { $0.isEmpty ? nil : $0 }
    if refreshToken == nil, case .refresh(let old) = form {
      // RFC 6749 §6: a reply without a new refresh token leaves the old one valid.
      refreshToken = old
    }
    return AuthModel(
      uid: Self.text(reply[userIDField]) ?? "", accessToken: accessToken, mcUid: key.account,
      expiresAt: expiresAt, extraInfo: extraInfo, refreshToken: refreshToken)
  }

  /// The error for an RFC 6749 §5.2 reply.
  static func refusal(
    _ error: String, _ description: Any?, status: Int, grant: String, secrets: [String],
    assertion: Bool = false, refusedInput: String? = nil
  ) -> AuthCoordinatorError {
    let shownCode = Sanitizer.clean(error, maxLength: 64, secrets: secrets)
    var message = "the token endpoint refused the \(grant) request: \(shownCode)"
    if let refusedInput, error == "invalid_grant" {
      // What the integrator's closure made (a subject token, an assertion) was refused, not
      // a refresh token or a code: the message says which, never its value.
      message =
        "the token endpoint refused \(refusedInput) of the \(grant) request: \(shownCode)"
    }
    if assertion, error == "invalid_client" {
      // The assertion authenticated the client: the server refused it (its signature, its
      // audience, its lifetime, a replayed jti), not a secret.
      message =
        "the token endpoint refused the client assertion of the \(grant) request: \(shownCode)"
    }
    if let description = description as? String, !description.isEmpty {
      message += " (\(Sanitizer.clean(description, secrets: secrets)))"
    }
    if let code = rfcCodes[error] {
      return AuthCoordinatorError(code, message, transient: false)
    }
    let transient =
      isTransientStatus(status) || error == "temporarily_unavailable" || error == "server_error"
    return AuthCoordinatorError(.tokenEndpointError, message, transient: transient)
  }

  /// RFC 6749 §5.2's error codes, by name.
  static let rfcCodes: [String: AuthCoordinatorError.Code] = [
    "invalid_request": .invalidRequest, "invalid_client": .invalidClient,
    "invalid_grant": .invalidGrant, "unauthorized_client": .unauthorizedClient,
    "unsupported_grant_type": .unsupportedGrantType, "invalid_scope": .invalidScope,
  ]

  static func isTransientStatus(_ status: Int) -> Bool {
    status == 429 || (500...599).contains(status)
  }

  static func endpointError(_ message: String, transient: Bool) -> AuthCoordinatorError {
    AuthCoordinatorError(.tokenEndpointError, message, transient: transient)
  }

  /// A number (0 and 1 included on every platform: see `JSONValues`), or a string holding one.
  static func seconds(_ value: Any) -> TimeInterval? {
    if let number = JSONValues.number(value) { return number }
    if let text = value as? String {
      return TimeInterval(text.trimmingCharacters(in: .whitespaces))
    }
    return nil
  }

  /// A string, or a number (0 and 1 included) written as text; `nil` for a boolean.
  static func text(_ value: Any?) -> String? {
    JSONValues.text(value)
  }
}
