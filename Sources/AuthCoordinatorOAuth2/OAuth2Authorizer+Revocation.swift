import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

// Token revocation on sign-out (RFC 7009): the core calls `revoke(_:)` with the model it
// cleared, after the sign-out took effect, once, bounded by its `revocationTimeout`.
extension OAuth2Authorizer {
  /// Whether the coordinator revokes a signed-out account's tokens: `true` when there is a
  /// ``revocationEndpoint``; for an authorizer made from an ``issuer``, when its metadata names
  /// one (or has not been read yet). See ``/AuthCoordinator/Authorizer/revokesOnSignOut``.
  public var revokesOnSignOut: Bool {
    guard let discovery else { return revocationEndpoint != nil }
    guard let metadata = discovery.cached else { return true }
    return metadata.revocationEndpoint != nil
  }

  /// Revokes `model`'s refresh token at the ``revocationEndpoint`` (RFC 7009), or its access
  /// token when it holds no refresh token; does nothing without an endpoint.
  ///
  /// For an authorizer made from an ``issuer``, the endpoint is the metadata's
  /// `revocation_endpoint` (read first if it was not yet); a metadata without one fails the
  /// revocation with ``AuthCoordinatorError/Code-swift.struct/revocationEndpointError``.
  ///
  /// One `POST` of `token=<the token>&token_type_hint=refresh_token` (or `access_token`), with
  /// the same client authentication as the token requests (a fresh client assertion included),
  /// bounded by ``timeout``, on a connection of its own, no redirect followed. It is never
  /// retried. The coordinator calls it after a sign-out has taken effect
  /// (``/AuthCoordinator/AuthCoordinator/accountStatusChanged(_:)``,
  /// ``/AuthCoordinator/AuthCoordinator/invalidate(account:)``); you may call it yourself.
  ///
  /// ```swift
  /// var authorizer = OAuth2Authorizer(tokenEndpoint: tokenURL, clientID: "svc", clientSecret: secret)
  /// authorizer.revocationEndpoint = URL(string: "https://auth.example.com/oauth/revoke")!
  /// // coordinator.invalidate(account:) now revokes the account's refresh token.
  /// ```
  ///
  /// - Parameter model: The model whose tokens are no longer needed.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError``: RFC 6749 §5.2's codes for an error
  ///   reply (`invalid_client`...; `unsupported_token_type` as
  ///   ``AuthCoordinatorError/Code-swift.struct/revocationEndpointError``),
  ///   ``AuthCoordinatorError/Code-swift.struct/revocationEndpointError`` for
  ///   any other status than 200 (transient for 5xx and 429: RFC 7009 §2.2.1's 503 says to try
  ///   later, which the coordinator does not),
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/networkError`` when the request
  ///   did not get through or ran out of time, what the client-assertion closure throws, and
  ///   `CancellationError`. No message holds a token.
  public func revoke(_ model: AuthModel) async throws {
    if discovery != nil {
      let resolved = try await discovered()
      guard resolved.revocationEndpoint != nil else {
        throw Self.revocationError(
          "the issuer's metadata names no revocation_endpoint: nothing was revoked",
          transient: false)
      }
      return try await resolved.revoke(model)
    }
    guard let endpoint = revocationEndpoint else { return }
    let refreshToken = model.refreshToken.flatMap { $0.isEmpty ? nil : $0 }
    let token = refreshToken ?? model.accessToken
    guard !token.isEmpty else { return }
    let hint = refreshToken == nil ? "access_token" : "refresh_token"
    let assertion = try await clientAssertion(for: endpoint)
    let items =
      [("token", token), ("token_type_hint", hint)] + clientFormItems(assertion: assertion)
    let request = formRequest(to: endpoint, items, timeout: timeout)
    let secrets =
      [token, model.accessToken] + (effectiveClientSecret.map { [$0] } ?? [])
      + (assertion.map { [$0.value] } ?? [])
    let redirects = RedirectPolicy(
      endpoint: endpoint, allowsSameOriginHTTPS: allowsSameOriginHTTPSRedirects)
    let outcome: HTTPTransportOutcome
    do {
      try Task.checkCancellation()
      outcome = try await transport.send(
        HTTPTransportRequest(
          request, maxBodySize: maxBodySize, timeout: timeout, requiresFreshConnection: true,
          redirect: { _, next in redirects.allowsRedirect(to: next.url) ? next : nil }))
    } catch let error as URLError {
      // The error itself is dropped: it carries the request URL.
      throw AuthCoordinatorError(
        .networkError,
        error.code == .timedOut
          ? "the revocation request timed out after \(timeout)"
          : "the revocation request did not reach the revocation endpoint (URLError "
            + "\(error.code.rawValue))", underlying: URLError(error.code))
    }
    switch outcome {
    case .redirectRefused(let status):
      throw Self.revocationError(
        "the revocation endpoint answered HTTP \(status), a redirect; it was not followed",
        transient: false)
    case .truncated(let response, _):
      let status = (response as? HTTPURLResponse)?.statusCode ?? 0
      throw Self.revocationError(
        "the revocation endpoint's reply (HTTP \(status)) is larger than \(maxBodySize) bytes",
        transient: Self.isTransientStatus(status))
    case .complete(let response, let body):
      let status = (response as? HTTPURLResponse)?.statusCode ?? 0
      // RFC 7009 §2.2: 200 is success, an unknown or already revoked token included.
      if status == 200 { return }
      let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
      if let error = object?["error"] as? String {
        var message =
          "the revocation endpoint refused the revocation: "
          + Sanitizer.clean(error, maxLength: 64, secrets: secrets)
        if let description = object?["error_description"] as? String, !description.isEmpty {
          message += " (\(Sanitizer.clean(description, secrets: secrets)))"
        }
        let transient = Self.isTransientStatus(status) || error == "temporarily_unavailable"
        throw AuthCoordinatorError(
          Self.rfcCodes[error] ?? .revocationEndpointError, message,
          transient: Self.rfcCodes[error] == nil ? transient : false)
      }
      throw Self.revocationError(
        "the revocation endpoint answered HTTP \(status)", transient: Self.isTransientStatus(status)
      )
    }
  }

  static func revocationError(_ message: String, transient: Bool) -> AuthCoordinatorError {
    AuthCoordinatorError(.revocationEndpointError, message, transient: transient)
  }
}
