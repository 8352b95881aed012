import AuthCoordinator
import Foundation

// The two endpoints, HTTP-neutral: `POST /alipay/token` and `POST /alipay/refresh`.
extension AlipayTokenService {
  /// The path of the sign-in endpoint, `/alipay/token`.
  public static let tokenPath = "/alipay/token"
  /// The path of the refresh endpoint, `/alipay/refresh`.
  public static let refreshPath = "/alipay/refresh"
  /// The path of the sign-out endpoint, `/alipay/signout`.
  public static let signOutPath = "/alipay/signout"

  /// Answers one request to `POST /alipay/token`, `POST /alipay/refresh` or
  /// `POST /alipay/signout`.
  ///
  /// - `POST /alipay/token`, fields `auth_code` and `mc_uid` (a form or a JSON object): signs
  ///   the user in (``signIn(authCode:mcUid:)``).
  /// - `POST /alipay/refresh`, fields `mc_uid` and optionally `rejected_access_token`:
  ///   ``refresh(mcUid:rejecting:)``.
  /// - `POST /alipay/signout`, field `mc_uid`: ``signOut(mcUid:)``; HTTP 200 `{}`.
  ///
  /// Success is HTTP 200 `{"user_id", "access_token", "expires_in", "mc_user_id"}`
  /// (`expires_in`: whole seconds the access token has left, rounded down; `mc_user_id`: the
  /// `mc_uid` sent). A refresh token never leaves the server. Failures:
  /// - 400 `{"error":"invalid_request"}`: a missing field or an unreadable body;
  /// - 401 `{"error":"authorization_required","error_description":…}`: the user must
  ///   authorize (unknown user, family ended, authorization cancelled, code or refresh token
  ///   refused);
  /// - 403 `{"error":"refresh_refused"}`: a terminal failure on the server's side (bad
  ///   signature, invalid app id, missing permissions, malformed reply);
  /// - 503 `{"error":"temporarily_unavailable"}`, with `Retry-After` (whole seconds, rounded
  ///   up) when Alipay said how long to wait: a transient failure;
  /// - 404 `{"error":"not_found"}` for another path, 405 `{"error":"method_not_allowed"}`
  ///   for another method.
  ///
  /// - Parameter request: The request.
  /// - Returns: The response; never a refresh token, never a secret in a description.
  public func respond(to request: AlipayServiceRequest) async -> AlipayServiceResponse {
    let path = request.path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
    guard path == Self.tokenPath || path == Self.refreshPath || path == Self.signOutPath else {
      return .json(404, ["error": "not_found"])
    }
    guard request.method.uppercased() == "POST" else {
      return .json(405, ["error": "method_not_allowed"], extraHeaders: ["Allow": "POST"])
    }
    guard let fields = request.fields, let mcUid = fields["mc_uid"], !mcUid.isEmpty else {
      return Self.invalidRequest("mc_uid is required")
    }
    if path == Self.signOutPath {
      await signOut(mcUid: mcUid)
      return .json(200, [:])
    }
    do {
      let model: AuthModel
      if path == Self.tokenPath {
        guard let code = fields["auth_code"], !code.isEmpty else {
          return Self.invalidRequest("auth_code is required")
        }
        model = try await signIn(authCode: code, mcUid: mcUid)
      } else {
        model = try await refresh(mcUid: mcUid, rejecting: fields["rejected_access_token"])
      }
      return success(model, mcUid: mcUid)
    } catch let error as AuthCoordinatorError {
      return Self.failure(error)
    } catch {
      // A cancelled request: the server is going away.
      return .json(503, ["error": "temporarily_unavailable"])
    }
  }

  private func success(_ model: AuthModel, mcUid: String) -> AlipayServiceResponse {
    var body: [String: any Sendable] = [
      "user_id": model.uid, "access_token": model.accessToken, "mc_user_id": mcUid,
    ]
    if let expiresAt = model.expiresAt {
      let left = expiresAt.timeIntervalSince(api.now())
      body["expires_in"] = left.isFinite ? max(0, Int64(left.rounded(.down))) : 0
    }
    return .json(200, body)
  }

  private static func invalidRequest(_ description: String) -> AlipayServiceResponse {
    .json(400, ["error": "invalid_request", "error_description": description])
  }

  /// The response for a failure, by the error's meaning.
  static func failure(_ error: AuthCoordinatorError) -> AlipayServiceResponse {
    if error.code == .interactionRequired {
      return .json(
        401,
        [
          "error": "authorization_required",
          "error_description": "the user must authorize the app in Alipay again",
        ])
    }
    if error.isTransient {
      var headers: [String: String] = [:]
      if let retryAfter = error.retryAfter {
        let (seconds, attoseconds) = retryAfter.components
        headers["Retry-After"] = String(max(0, seconds + (attoseconds > 0 ? 1 : 0)))
      }
      return .json(503, ["error": "temporarily_unavailable"], extraHeaders: headers)
    }
    return .json(403, ["error": "refresh_refused"])
  }
}
