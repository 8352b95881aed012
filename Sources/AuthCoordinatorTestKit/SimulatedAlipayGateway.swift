import AuthCoordinatorOAuth2
import Foundation
import HTTPSupport
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A SIMULATION of Alipay's open-platform gateway for `alipay.system.oauth.token`, for tests.
/// It is not Alipay, talks to no Alipay server, and follows only what this package's article
/// "Refreshing without the user" lists (documented facts and *(inferred)* ones).
///
/// Use it in process, as an ``/AuthCoordinatorOAuth2/HTTPTransport`` (no socket, any clock), or
/// on a real loopback socket: `LoopbackHTTPServer(handler: gateway.handle)`.
///
/// - ``issueCode(forUser:)`` issues an auth code, as Alipay does when the user consents:
///   single use, dead after ``codeLifetime``.
/// - `grant_type=authorization_code` starts a token *family*; `grant_type=refresh_token`
///   ROTATES: each refresh token works once. Presenting a spent one is a reuse: the whole family
///   is revoked and the reuse counted (what a careful server does; Alipay's own behaviour on
///   reuse is not documented).
/// - A family ends ``familyLifetime`` after its authorization; `re_expires_in` shrinks with
///   each refresh, as Alipay documents. Access tokens live ``accessTokenLifetime``.
/// - ``cancelAuthorization(ofUser:)`` kills every token of a user, as the user cancelling in
///   Alipay does; a later refresh gets `isv.refresh-token-invalid`.
/// - Errors come in Alipay's `error_response` shape (`code`, `msg`, `sub_code`, `sub_msg`).
/// - ``outage`` fails every request, ``failNext(_:with:)`` the next few: HTTP 5xx, or a 200
///   with `isp.unknow-error` (code 20000).
/// - Every request's `sign` is checked with the test's verifier over the sign content it
///   recomputes; a missing one is refused with `isv.missing-signature` (40001), a wrong one
///   with `isv.invalid-signature` (40002). A wrong `app_id` gets `isv.invalid-app-id`.
public final class SimulatedAlipayGateway: HTTPTransport, @unchecked Sendable {
  /// The gateway's counters.
  public struct Counters: Sendable, Equatable {
    /// Requests received, whatever their answer.
    public var requests = 0
    /// `authorization_code` grants issued (each a new family).
    public var codeGrants = 0
    /// `refresh_token` grants issued (each a rotation).
    public var refreshGrants = 0
    /// Spent refresh tokens presented again.
    public var reuses = 0
    /// Requests refused for a missing or wrong signature.
    public var invalidSignatures = 0
    /// Requests answered with an error, failures included.
    public var errors = 0
    /// Requests answered by an injected failure (``outage``, ``failNext(_:with:)``).
    public var injectedFailures = 0

    /// All zero.
    public init() {}
  }

  /// An injected failure.
  public enum Failure: Sendable, Equatable {
    /// This HTTP status (502, 503, 429...), an empty body, and this `Retry-After` if any.
    case http(status: Int, retryAfter: String? = nil)
    /// HTTP 200 with `error_response` code 20000, sub code `isp.unknow-error`.
    case ispUnknownError
  }

  /// Whether an access token may be used.
  public typealias TokenStatus = RotatingTokenIssuer.AccessStatus

  private struct State {
    var outage: Failure?
    var failures: [Failure] = []
    var counters = Counters()
    var codes: [String: (user: String, expiresAt: Date)] = [:]
    /// Each family's user.
    var users: [Int: String] = [:]
    /// The rotation rules, shared with every simulated server here; a rotation revokes the
    /// family's earlier access tokens.
    var issuer = RotatingTokenIssuer(
      accessTokenPrefix: "sim-access", refreshTokenPrefix: "sim-refresh",
      rotationRevokesAccessTokens: true)
    var serial = 0
  }

  /// The application id the gateway accepts.
  public let appID: String
  /// How long an access token lives (`expires_in`).
  public let accessTokenLifetime: Duration
  /// How long a family lives from its authorization (the first `re_expires_in`).
  public let familyLifetime: Duration
  /// How long an auth code can be redeemed.
  public let codeLifetime: Duration
  private let verifier: @Sendable (_ signContent: String, _ signature: String) -> Bool
  private let date: @Sendable () -> Date
  private let state = LockedState(State())

  /// Creates a gateway.
  ///
  /// - Parameters:
  ///   - appID: The application id it accepts.
  ///   - accessTokenLifetime: The access tokens' lifetime; 1 hour by default.
  ///   - familyLifetime: The families' lifetime; 30 days by default.
  ///   - codeLifetime: The auth codes' lifetime; 3 minutes by default.
  ///   - date: The wall clock (a ``ManualClock``'s `dateSource` in a test); `Date()` by default.
  ///   - verifier: Checks a request's `sign` over its sign content (``TestSigner/verify(_:_:)``).
  public init(
    appID: String, accessTokenLifetime: Duration = .seconds(3600),
    familyLifetime: Duration = .seconds(30 * 86_400), codeLifetime: Duration = .seconds(180),
    date: @escaping @Sendable () -> Date = { Date() },
    verifier: @escaping @Sendable (_ signContent: String, _ signature: String) -> Bool
  ) {
    self.appID = appID
    self.accessTokenLifetime = accessTokenLifetime
    self.familyLifetime = familyLifetime
    self.codeLifetime = codeLifetime
    self.date = date
    self.verifier = verifier
  }

  /// The counters so far.
  public var counters: Counters { state.withLock { $0.counters } }

  /// A failure every request gets while it is set; `nil` (the default) to answer normally.
  public var outage: Failure? {
    get { state.withLock { $0.outage } }
    set { state.withLock { $0.outage = newValue } }
  }

  /// Makes the next `count` requests fail with `failure` (after any queued before).
  ///
  /// - Parameters:
  ///   - count: How many requests fail.
  ///   - failure: How they fail.
  public func failNext(_ count: Int, with failure: Failure) {
    state.withLock { $0.failures += Array(repeating: failure, count: count) }
  }

  /// Issues an auth code for `user`, as Alipay does when the user consents in the Alipay app.
  ///
  /// - Parameter user: The Alipay user id (`2088…`).
  /// - Returns: A single-use code.
  public func issueCode(forUser user: String) -> String {
    let now = date()
    return state.withLock { state in
      state.serial += 1
      let code = "sim-code-\(state.serial)"
      state.codes[code] = (user, now.addingTimeInterval(Double(codeLifetime.components.seconds)))
      return code
    }
  }

  /// The user cancels the authorization in Alipay: every family of `user` is revoked.
  ///
  /// - Parameter user: The Alipay user id.
  public func cancelAuthorization(ofUser user: String) {
    state.withLock { state in
      for (family, owner) in state.users where owner == user {
        state.issuer.revoke(family: family)
      }
    }
  }

  /// Whether `accessToken` may be used now.
  ///
  /// - Parameter accessToken: An access token.
  /// - Returns: Its status.
  public func status(ofAccessToken accessToken: String) -> TokenStatus {
    let now = date()
    return state.withLock { $0.issuer.status(ofAccessToken: accessToken, at: now) }
  }

  /// The gateway over HTTP: answers a `POST` of a form (and query) for
  /// `alipay.system.oauth.token`. Serve it with `LoopbackHTTPServer(handler: gateway.handle)`.
  ///
  /// - Parameter request: The request.
  /// - Returns: Alipay's JSON reply, or an injected failure.
  public func handle(_ request: LoopbackHTTPRequest) async -> LoopbackHTTPResponse {
    var parameters = Self.parse(request.query)
    parameters.merge(Self.parse(String(decoding: request.body, as: UTF8.self))) { _, body in body }
    return answer(parameters)
  }

  /// The gateway in process: the same answers as ``handle(_:)``, with no socket.
  ///
  /// - Parameter request: The request.
  /// - Returns: The complete reply.
  /// - Throws: `CancellationError` when the task is cancelled.
  public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    try Task.checkCancellation()
    let url = request.urlRequest.url ?? URL(string: "http://gateway.invalid/")!
    let reply = await handle(
      LoopbackHTTPRequest(
        method: request.urlRequest.httpMethod ?? "GET", path: url.path, query: url.query ?? "",
        body: request.urlRequest.httpBody ?? Data()))
    let response = HTTPURLResponse(
      url: url, statusCode: reply.status, httpVersion: "HTTP/1.1", headerFields: reply.headers)!
    return .complete(response, reply.body)
  }

  private static func parse(_ form: String) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in form.split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      let decode = { (part: Substring) in
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
      }
      fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
    }
    return fields
  }

  /// The sign content the gateway recomputes: every parameter but `sign` and the empty ones,
  /// sorted by name, `name=value` joined with `&`.
  private static func signContent(_ parameters: [String: String]) -> String {
    parameters.filter { $0.key != "sign" && !$0.value.isEmpty }
      .sorted { Array($0.key.utf8).lexicographicallyPrecedes(Array($1.key.utf8)) }
      .map { "\($0.key)=\($0.value)" }.joined(separator: "&")
  }

  private func answer(_ parameters: [String: String]) -> LoopbackHTTPResponse {
    let now = date()
    return state.withLock { state in
      state.counters.requests += 1
      if let failure = state.outage ?? (state.failures.isEmpty ? nil : state.failures.removeFirst())
      {
        state.counters.injectedFailures += 1
        state.counters.errors += 1
        switch failure {
        case .http(let status, let retryAfter):
          return LoopbackHTTPResponse(
            status: status, headers: retryAfter.map { ["Retry-After": $0] } ?? [:])
        case .ispUnknownError:
          return Self.error("20000", "Service Currently Unavailable", "isp.unknow-error", "服务暂不可用")
        }
      }
      let reply = Self.apply(parameters, to: &state, now: now, gateway: self)
      if reply.isError { state.counters.errors += 1 }
      return reply.response
    }
  }

  private struct Reply {
    var response: LoopbackHTTPResponse
    var isError: Bool
  }

  private static func apply(
    _ parameters: [String: String], to state: inout State, now: Date,
    gateway: SimulatedAlipayGateway
  ) -> Reply {
    func refuse(_ code: String, _ msg: String, _ sub: String, _ subMsg: String) -> Reply {
      Reply(response: error(code, msg, sub, subMsg), isError: true)
    }
    guard let sign = parameters["sign"], !sign.isEmpty else {
      state.counters.invalidSignatures += 1
      return refuse("40001", "Missing Required Arguments", "isv.missing-signature", "缺少签名参数")
    }
    guard gateway.verifier(signContent(parameters), sign) else {
      state.counters.invalidSignatures += 1
      return refuse("40002", "Invalid Arguments", "isv.invalid-signature", "验签出错")
    }
    guard parameters["app_id"] == gateway.appID else {
      return refuse("40002", "Invalid Arguments", "isv.invalid-app-id", "无效的AppID参数")
    }
    guard parameters["method"] == "alipay.system.oauth.token" else {
      return refuse("40002", "Invalid Arguments", "isv.invalid-method", "不存在的方法名")
    }
    switch parameters["grant_type"] {
    case "authorization_code":
      guard let code = parameters["code"], let redeemed = state.codes.removeValue(forKey: code),
        redeemed.expiresAt > now
      else {
        return refuse("40002", "Invalid Arguments", "isv.code-invalid", "授权码(auth_code)错误、状态不对或过期")
      }
      let issued = state.issuer.startFamily(
        at: now, lifetime: gateway.accessTokenLifetime, familyLifetime: gateway.familyLifetime)
      state.users[issued.family] = redeemed.user
      state.counters.codeGrants += 1
      return Reply(response: tokens(issued, user: redeemed.user, now: now), isError: false)
    case "refresh_token":
      let reuses = state.issuer.counters.reuses
      let rotation = state.issuer.rotate(
        parameters["refresh_token"] ?? "", at: now, lifetime: gateway.accessTokenLifetime)
      state.counters.reuses += state.issuer.counters.reuses - reuses
      switch rotation {
      case .success(let issued):
        state.counters.refreshGrants += 1
        return Reply(
          response: tokens(issued, user: state.users[issued.family] ?? "", now: now),
          isError: false)
      case .failure(.familyEnded):
        return refuse(
          "40002", "Invalid Arguments", "isv.refresh-token-time-out", "刷新令牌(refresh_token)过期")
      case .failure:
        return refuse(
          "40002", "Invalid Arguments", "isv.refresh-token-invalid", "刷新令牌(refresh_token)错误或状态不对")
      }
    default:
      return refuse("40002", "Invalid Arguments", "isv.grant-type-invalid", "grant_type参数不正确")
    }
  }

  private static func tokens(
    _ issued: RotatingTokenIssuer.Issued, user: String, now: Date
  ) -> LoopbackHTTPResponse {
    let lifetime = Int64(issued.expiresAt.timeIntervalSince(now).rounded(.down))
    let familyLeft = max(
      0, Int64((issued.familyEndsAt ?? now).timeIntervalSince(now).rounded(.down)))
    return json([
      "alipay_system_oauth_token_response": [
        "user_id": user, "access_token": issued.accessToken, "expires_in": lifetime,
        "refresh_token": issued.refreshToken, "re_expires_in": familyLeft,
      ] as [String: Any],
      "sign": "simulated-response-signature",
    ])
  }

  private static func error(_ code: String, _ msg: String, _ sub: String, _ subMsg: String)
    -> LoopbackHTTPResponse
  {
    json([
      "error_response": ["code": code, "msg": msg, "sub_code": sub, "sub_msg": subMsg],
      "sign": "simulated-response-signature",
    ])
  }

  private static func json(_ object: [String: Any]) -> LoopbackHTTPResponse {
    let body =
      (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    return LoopbackHTTPResponse(
      status: 200, headers: ["Content-Type": "text/html;charset=utf-8"], body: body)
  }
}
