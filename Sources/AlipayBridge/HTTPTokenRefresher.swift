import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Asks the integrator's server to refresh a user's login state without the user: the silent
/// stage of a ``/AuthCoordinator/SilentFirstAuthorizer`` in front of ``AlipayAuthorizer``.
///
/// Alipay's refresh token, like the application's private key that signs the refresh, lives on
/// the integrator's server and never in the app (see
/// `Sources/AlipayBridge/Documentation.docc/RefreshingWithoutABounce.md`). The app sends the
/// host app's user id (parameter ``mcUidParameter``, default `mc_uid`) and, when a caller
/// rejected its token (the container's `NeedRefreshToken`), that access token (parameter
/// ``rejectedTokenParameter``, default `rejected_access_token`), so that the server refreshes
/// only a token it still holds and answers a newer one at once. The server answers:
/// - **200** with the same JSON as the auth-code exchange (``HTTPTokenExchanger``): `user_id`,
///   `access_token`, `expires_in`, optionally `mc_user_id`; a model, no bounce;
/// - **401** with `{"error": "authorization_required"}`: the refresh family ended, the user
///   cancelled the authorization in Alipay, or the server knows nothing of the user. The
///   refresher throws code
///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/interactionRequired``: the
///   silent-first authorizer bounces the user once (never a retry);
/// - **429 or 5xx** (or no answer): transient, ``AuthCoordinator/AuthCoordinatorError/Code/refreshFailed``
///   (or ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/timedOut``) with
///   `isTransient` and the server's `Retry-After`: no bounce, the coordinator's retries and
///   back-off apply;
/// - anything else: terminal ``AuthCoordinator/AuthCoordinatorError/Code/refreshFailed``, no bounce.
///
/// ```swift
/// let authorizer = SilentFirstAuthorizer(
///   silent: HTTPTokenRefresher(endpoint: URL(string: "https://api.example.com/alipay/refresh")!),
///   interactive: AlipayAuthorizer(provider: provider, exchanger: exchanger))
/// ```
///
/// One refresh is one request, never repeated by the refresher itself: the coordinator decides
/// retries. No error, message or description contains a token.
public struct HTTPTokenRefresher: Authorizer {
  /// The integrator's refresh endpoint.
  public var endpoint: URL
  /// How the parameters travel. Default ``HTTPTokenExchanger/Encoding/postForm``.
  public var encoding: HTTPTokenExchanger.Encoding
  /// The name of the host-app user id parameter. Default `mc_uid`.
  public var mcUidParameter: String
  /// The name of the rejected access token parameter, sent on a forced refresh. Default
  /// `rejected_access_token`.
  public var rejectedTokenParameter: String
  /// Static parameters sent with every refresh; the two above win over an entry of the same
  /// name.
  public var parameters: [String: String]
  /// Extra request headers, applied last (the app's own session with its server, say).
  public var headers: [String: String]
  /// How long one refresh may take, from the start of the request to the last byte of the
  /// reply. Default 5 seconds.
  public var timeout: Duration
  /// The most reply bytes read. Default 1 MiB.
  public var maxBodySize: Int
  /// The longest `Retry-After` honoured. Default 5 minutes.
  public var maxRetryAfter: Duration
  /// The session requests run on.
  public var session: URLSession
  /// The wall clock `expires_in` counts from. Default `Date()`.
  public var now: @Sendable () -> Date

  /// Creates a refresher.
  ///
  /// - Parameters:
  ///   - endpoint: The integrator's refresh endpoint.
  ///   - encoding: How parameters are sent; `POST` form by default.
  ///   - mcUidParameter: The host-app user id parameter name; `mc_uid` by default.
  ///   - rejectedTokenParameter: The rejected token parameter name; `rejected_access_token`
  ///     by default.
  ///   - parameters: Static parameters sent with every refresh.
  ///   - headers: Extra request headers.
  ///   - timeout: How long the whole request may take; 5 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - maxRetryAfter: The longest `Retry-After` honoured; 5 minutes by default.
  ///   - session: The session to use; by default one shared ephemeral session per process.
  ///   - now: The wall-clock source for `expiresAt`; `Date()` by default.
  public init(
    endpoint: URL,
    encoding: HTTPTokenExchanger.Encoding = .postForm,
    mcUidParameter: String = "mc_uid",
    rejectedTokenParameter: String = "rejected_access_token",
    parameters: [String: String] = [:],
    headers: [String: String] = [:],
    timeout: Duration = .seconds(5),
    maxBodySize: Int = 1 << 20,
    maxRetryAfter: Duration = .seconds(300),
    session: URLSession? = nil,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.endpoint = endpoint
    self.encoding = encoding
    self.mcUidParameter = mcUidParameter
    self.rejectedTokenParameter = rejectedTokenParameter
    self.parameters = parameters
    self.headers = headers
    self.timeout = timeout
    self.maxBodySize = maxBodySize
    self.maxRetryAfter = maxRetryAfter
    self.session = session ?? HTTPTokenExchanger.defaultSession
    self.now = now
  }

  /// `false`: a refresh at the server never involves the user.
  public var isInteractive: Bool { false }

  /// ``/AuthCoordinator/SilentRefreshPolicy/recommended``: refresh ahead of expiry, retries
  /// of transient failures with back-off.
  public var silentRefresh: SilentRefreshPolicy? { .recommended }

  /// ``timeout``: the longest one refresh can take.
  public var longestRefresh: Duration? { timeout }

  /// Asks the server for a fresh model for `request.key`.
  ///
  /// - Parameter request: The authorization; on a forced refresh, its
  ///   ``/AuthCoordinator/AuthorizationRequest/replacing`` model's access token is the
  ///   rejected one.
  /// - Returns: The model the server answered.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` (see the type's documentation), with a
  ///   ``TokenExchangeError`` attached; `CancellationError` when the Task is cancelled.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let rejected = request.reason == .forcedRefresh ? request.replacing?.accessToken : nil
    let urlRequest = makeRequest(key: request.key, rejecting: rejected)
    try Task.checkCancellation()
    let outcome = try await BoundedDataTask.run(
      urlRequest, on: session, limit: maxBodySize, timeout: timeout.seconds,
      redirects: RedirectPolicy(endpoint: endpoint, allowsSameOriginHTTPS: false))
    return try model(from: outcome, key: request.key, secrets: rejected.map { [$0] } ?? [])
  }

  /// The parameters in the order they are sent: the static ones sorted by name, the mcUid,
  /// then the rejected token when there is one.
  func orderedParameters(key: AccountKey, rejecting rejected: String?) -> [(String, String)] {
    let reserved: Set = [mcUidParameter, rejectedTokenParameter]
    var items = parameters.filter { !reserved.contains($0.key) }.sorted { $0.key < $1.key }
      .map { ($0.key, $0.value) }
    items.append((mcUidParameter, key.mcUid))
    if let rejected { items.append((rejectedTokenParameter, rejected)) }
    return items
  }

  /// Builds the HTTP request for one refresh (always a `POST`: a token never travels in a
  /// URL). Package access: the `simulate` demo hands it to the integrator's endpoint code in
  /// process.
  package func makeRequest(key: AccountKey, rejecting rejected: String?) -> URLRequest {
    let items = orderedParameters(key: key, rejecting: rejected)
    var urlRequest = URLRequest(
      url: endpoint, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: timeout.seconds)
    urlRequest.httpMethod = "POST"
    urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
    if encoding == .postJSON {
      urlRequest.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
      urlRequest.httpBody = HTTPTokenExchanger.jsonObject(items)
    } else {
      urlRequest.setValue(
        "application/x-www-form-urlencoded; charset=utf-8", forHTTPHeaderField: "Content-Type")
      urlRequest.httpBody = Data(FormEncoding.form(items).utf8)
    }
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
      urlRequest.setValue(value, forHTTPHeaderField: name)
    }
    return urlRequest
  }
}
