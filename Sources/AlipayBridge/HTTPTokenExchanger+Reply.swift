import AuthCoordinator
import Foundation
import HTTPSupport
#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// The token server's reply: status, body size, JSON, and the model it describes.
extension HTTPTokenExchanger {

  func model(
    from outcome: BoundedDataTask.Outcome,
    code: AuthCode,
    key: AccountKey
  ) throws -> AuthModel {
    let secrets = [code.value]
    switch outcome {
    case .failed(let urlCode) where urlCode == .timedOut:
      throw Self.failure(
        .timedOut, "the token exchange timed out after \(timeout)",
        TokenExchangeError(.timedOut, urlErrorCode: urlCode.rawValue))
    case .redirectRefused(let status):
      throw Self.redirectRefused(status: status)
    case .failed(let urlCode):
      throw Self.failure(
        .exchangeFailed, "the token exchange failed in transport (URLError \(urlCode.rawValue))",
        TokenExchangeError(.transport, urlErrorCode: urlCode.rawValue))
    case .tooLarge(let response, let body):
      let status = (response as? HTTPURLResponse)?.statusCode
      let excerpt = BodyRedaction.excerpt(of: body, secrets: secrets)
      if let status, !(200...299).contains(status) {
        throw Self.failure(
          .exchangeFailed, "the token server answered HTTP \(status)",
          TokenExchangeError(.httpStatus, statusCode: status, bodyExcerpt: excerpt))
      }
      throw Self.failure(
        .exchangeFailed, "the token server's reply is larger than \(maxBodySize) bytes",
        TokenExchangeError(.bodyTooLarge, statusCode: status, bodyExcerpt: excerpt))
    case .complete(let response, let body):
      guard let http = response as? HTTPURLResponse else {
        throw Self.failure(
          .exchangeFailed, "the token server's reply is not HTTP",
          TokenExchangeError(.transport, urlErrorCode: URLError.badServerResponse.rawValue))
      }
      let status = http.statusCode
      // A 3xx the session did not offer to follow, or a reply from another origin than the
      // endpoint (which a refused redirect never produces): not the endpoint's answer.
      if (300...399).contains(status) {
        throw Self.redirectRefused(status: status)
      }
      if let final = http.url, !RedirectPolicy.sameOrigin(endpoint, final) {
        throw Self.failure(
          .exchangeFailed, "the token server's reply came from another origin than the endpoint",
          TokenExchangeError(.redirectRefused, statusCode: status))
      }
      guard (200...299).contains(status) else {
        throw Self.failure(
          .exchangeFailed, "the token server answered HTTP \(status)",
          TokenExchangeError(
            .httpStatus, statusCode: status,
            bodyExcerpt: BodyRedaction.excerpt(of: body, secrets: secrets)))
      }
      return try model(from: body, status: status, code: code, key: key)
    }
  }

  /// The model (or the error) of a complete reply: what ``exchange(_:for:)`` reads from the
  /// socket. Package access: the `simulate` demo reads the integrator's endpoint's reply,
  /// produced in process, with it.
  package func model(
    fromResponse response: HTTPURLResponse, body: Data, code: AuthCode, key: AccountKey
  ) throws -> AuthModel {
    try model(from: .complete(response, body), code: code, key: key)
  }

  func model(from body: Data, status: Int, code: AuthCode, key: AccountKey) throws
    -> AuthModel
  {
    let reply: TokenExchangeResponse
    do {
      reply = try TokenExchangeResponse.decode(body)
    } catch {
      throw Self.failure(
        .exchangeFailed, Self.message(for: error),
        TokenExchangeError(
          error.code, statusCode: status, field: error.field, serverCode: error.serverCode,
          bodyExcerpt: BodyRedaction.excerpt(of: body, secrets: [code.value])))
    }
    if let bound = reply.mcUserID, bound != key.mcUid {
      throw Self.failure(
        .exchangeFailed,
        "the token server bound the token to another host-app user than \(key.mcUid)",
        TokenExchangeError(
          .userMismatch, statusCode: status, field: "mc_user_id",
          bodyExcerpt: BodyRedaction.excerpt(of: body, secrets: [code.value, reply.accessToken])
        ))
    }
    return AuthModel(
      uid: reply.userID,
      accessToken: reply.accessToken,
      mcUid: reply.mcUserID ?? key.mcUid,
      // A lifetime beyond a century (1e300, say) is cut to one, so the model stays storable.
      expiresAt: reply.expiresIn.map {
        now().addingTimeInterval(Duration.saturating(seconds: $0).seconds)
      })
  }

  static func message(for failure: TokenExchangeResponse.Failure) -> String {
    switch failure.code {
    case .missingField:
      return "the token server's reply has no \(failure.field ?? "required field")"
    case .serverRejected:
      return "Alipay rejected the exchange (\(failure.serverCode ?? "no code"))"
    default:
      if let field = failure.field {
        return "the token server's reply has an invalid \(field)"
      }
      return "the token server's reply is not a JSON object"
    }
  }

  static func redirectRefused(status: Int) -> AuthCoordinatorError {
    failure(
      .exchangeFailed,
      "the token server answered HTTP \(status), a redirect; it was not followed (a token "
        + "endpoint does not redirect)",
      TokenExchangeError(.redirectRefused, statusCode: status))
  }

  static func failure(
    _ code: AuthCoordinatorError.Code,
    _ message: String,
    _ cause: TokenExchangeError
  ) -> AuthCoordinatorError {
    AuthCoordinatorError(code, message, underlying: cause)
  }
}
