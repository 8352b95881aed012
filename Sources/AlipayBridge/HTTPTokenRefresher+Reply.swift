import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// The integrator server's answer to a silent refresh: a model, "the user must authorize", a
// transient failure, or a terminal one.
extension HTTPTokenRefresher {
  /// The `error` a server answers (with HTTP 401) when only the user can help.
  public static let authorizationRequiredError = "authorization_required"

  func model(
    from outcome: BoundedDataTask.Outcome, key: AccountKey, secrets: [String]
  ) throws -> AuthModel {
    switch outcome {
    case .failed(let urlCode) where urlCode == .timedOut:
      throw AuthCoordinatorError(
        .timedOut, "the silent refresh at the integrator's server timed out after \(timeout)",
        underlying: TokenExchangeError(.timedOut, urlErrorCode: urlCode.rawValue),
        transient: true)
    case .failed(let urlCode):
      throw AuthCoordinatorError(
        .refreshFailed,
        "the silent refresh failed in transport (URLError \(urlCode.rawValue))",
        underlying: TokenExchangeError(.transport, urlErrorCode: urlCode.rawValue),
        transient: true)
    case .redirectRefused(let status):
      throw AuthCoordinatorError(
        .refreshFailed,
        "the refresh endpoint answered HTTP \(status), a redirect; it was not followed",
        underlying: TokenExchangeError(.redirectRefused, statusCode: status))
    case .tooLarge(let response, let body):
      let status = (response as? HTTPURLResponse)?.statusCode
      throw AuthCoordinatorError(
        .refreshFailed, "the refresh endpoint's reply is larger than \(maxBodySize) bytes",
        underlying: TokenExchangeError(
          .bodyTooLarge, statusCode: status,
          bodyExcerpt: BodyRedaction.excerpt(of: body, secrets: secrets)),
        transient: status.map(Self.isTransient) ?? false)
    case .complete(let response, let body):
      guard let http = response as? HTTPURLResponse else {
        throw AuthCoordinatorError(
          .refreshFailed, "the refresh endpoint's reply is not HTTP",
          underlying: TokenExchangeError(
            .transport, urlErrorCode: URLError.badServerResponse.rawValue),
          transient: true)
      }
      if let final = http.url, !RedirectPolicy.sameOrigin(endpoint, final) {
        throw AuthCoordinatorError(
          .refreshFailed, "the refresh endpoint's reply came from another origin",
          underlying: TokenExchangeError(.redirectRefused, statusCode: http.statusCode))
      }
      return try model(from: http, body: body, key: key, secrets: secrets)
    }
  }

  private func model(
    from http: HTTPURLResponse, body: Data, key: AccountKey, secrets: [String]
  ) throws -> AuthModel {
    let status = http.statusCode
    let excerpt = { BodyRedaction.excerpt(of: body, secrets: secrets) }
    guard (200...299).contains(status) else {
      let serverError = Self.errorName(in: body)
      if status == 401, serverError == Self.authorizationRequiredError {
        throw AuthCoordinatorError(
          .interactionRequired,
          "the integrator's server cannot refresh without the user (authorization_required):"
            + " the refresh family ended, the authorization was cancelled in Alipay, or the"
            + " server knows nothing of the user",
          underlying: TokenExchangeError(
            .serverRejected, statusCode: status, serverCode: serverError,
            bodyExcerpt: excerpt()),
          transient: false)
      }
      let transient = Self.isTransient(status)
      let retryAfter =
        transient
        ? RetryAfter.delay(
          http.value(forHTTPHeaderField: "Retry-After"),
          serverDate: http.value(forHTTPHeaderField: "Date"), now: now(), limit: maxRetryAfter)
        : nil
      throw AuthCoordinatorError(
        .refreshFailed,
        "the refresh endpoint answered HTTP \(status)"
          + (serverError.map { " (\($0))" } ?? ""),
        underlying: TokenExchangeError(
          .httpStatus, statusCode: status, serverCode: serverError, bodyExcerpt: excerpt()),
        transient: transient, retryAfter: retryAfter)
    }
    let reply: TokenExchangeResponse
    do {
      reply = try TokenExchangeResponse.decode(body)
    } catch {
      throw AuthCoordinatorError(
        .refreshFailed, HTTPTokenExchanger.message(for: error),
        underlying: TokenExchangeError(
          error.code, statusCode: status, field: error.field, serverCode: error.serverCode,
          bodyExcerpt: excerpt()))
    }
    if let bound = reply.mcUserID, bound != key.mcUid {
      throw AuthCoordinatorError(
        .refreshFailed,
        "the integrator's server answered for another host-app user than \(key.mcUid)",
        underlying: TokenExchangeError(
          .userMismatch, statusCode: status, field: "mc_user_id",
          bodyExcerpt: BodyRedaction.excerpt(of: body, secrets: secrets + [reply.accessToken])))
    }
    // Only what the app needs: a `refresh_token` in the reply (which the server should never
    // send) is not read, so it is never stored in the app.
    return AuthModel(
      uid: reply.userID, accessToken: reply.accessToken, mcUid: reply.mcUserID ?? key.mcUid,
      expiresAt: reply.expiresIn.map {
        now().addingTimeInterval(Duration.saturating(seconds: $0).seconds)
      })
  }

  /// The model (or the error) of a complete reply: what ``authorize(_:)`` reads from the
  /// socket. Package access: the `simulate` demo reads the integrator's endpoint's reply,
  /// produced in process, with it.
  package func model(
    fromResponse response: HTTPURLResponse, body: Data, key: AccountKey, secrets: [String] = []
  ) throws -> AuthModel {
    try model(from: .complete(response, body), key: key, secrets: secrets)
  }

  /// 408, 429 and 5xx: the server may answer later.
  static func isTransient(_ status: Int) -> Bool {
    status == 408 || status == 429 || (500...599).contains(status)
  }

  /// The `error` member of a JSON object body, if it has one and it looks like an error code
  /// (at most 64 letters, digits, `_`, `.` or `-`): anything else might be a secret the server
  /// echoed, and is never put in an error.
  static func errorName(in body: Data) -> String? {
    guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
      let name = object["error"] as? String, (1...64).contains(name.count),
      name.unicodeScalars.allSatisfy({
        ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
          || $0 == "_" || $0 == "." || $0 == "-"
      })
    else { return nil }
    return name
  }
}
