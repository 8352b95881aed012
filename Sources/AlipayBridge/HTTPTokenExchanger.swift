import AuthCoordinator
import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Exchanges an auth code for a model at the integrator's server, over `URLSession`.
///
/// One exchange is one HTTP request carrying the code (parameter ``codeParameter``, default
/// `auth_code`), the host app's user id (``mcUidParameter``, default `mc_uid`, so the server
/// can bind the Alipay user to it) and the static ``parameters``. The reply is decoded from
/// Alipay's `alipay_system_oauth_token_response` envelope or a flat object (see
/// `Sources/AlipayBridge/Documentation.docc/TheHTTPTokenExchanger.md`).
///
/// ```swift
/// let exchanger = HTTPTokenExchanger(
///   endpoint: URL(string: "https://api.example.com/alipay/token")!,
///   encoding: .postJSON,
///   headers: ["X-App-Version": "4.2"])
/// let authorizer = AlipayAuthorizer(provider: provider, exchanger: exchanger)
/// ```
///
/// > Important: The exchange is **never retried**: the auth code is single use, and a retry
/// > after the server consumed it can only fail. Every failure is final for that code; the
/// > coordinator's next request starts a new authorization.
///
/// Errors are ``/AuthCoordinator/AuthCoordinatorError``s with a ``TokenExchangeError`` as
/// ``/AuthCoordinator/AuthCoordinatorError/underlying``:
/// - a request timeout (``timeout``) throws code
///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/timedOut``, the same code the
///   coordinator uses when its own exchange deadline passes, so callers see one code for "the
///   exchange took too long" whichever deadline fired first;
/// - every other failure throws ``AuthCoordinator/AuthCoordinatorError/Code/exchangeFailed``;
/// - a cancelled Task throws `CancellationError` (the HTTP request is cancelled).
///
/// No error, message or description contains the auth code or an access token.
///
/// > Important: Redirects are refused: a token endpoint does not redirect, and following one
/// > would send the headers (a bearer token) and, with ``Encoding/getQuery``, the auth code to
/// > another host, and accept that host's reply. A 3xx reply fails with
/// > ``TokenExchangeError/Code-swift.struct/redirectRefused`` and nothing is sent to its
/// > `Location`; see ``allowsSameOriginHTTPSRedirects`` for the one exception.
public struct HTTPTokenExchanger: TokenExchanger {
  /// How the parameters travel to the server.
  public enum Encoding: String, Sendable, Hashable, CaseIterable {
    /// `GET`, parameters in the URL query (appended to any query the endpoint already has).
    ///
    /// > Important: The code then appears in the URL, and so in server access logs; prefer a
    /// > `POST` encoding when the server allows it.
    case getQuery
    /// `POST`, `application/x-www-form-urlencoded; charset=utf-8` body.
    case postForm
    /// `POST`, `application/json; charset=utf-8` body: one JSON object of strings.
    case postJSON
  }

  /// The integrator's token endpoint.
  public var endpoint: URL
  /// How the parameters are sent. Default ``Encoding/postForm``.
  public var encoding: Encoding
  /// The name of the auth-code parameter. Default `auth_code`.
  public var codeParameter: String
  /// The name of the host-app user id parameter (the key's `mcUid`). Default `mc_uid`.
  public var mcUidParameter: String
  /// Static parameters sent with every exchange (an app id, a client version...). The code and
  /// the mcUid win over an entry of the same name.
  public var parameters: [String: String]
  /// Extra request headers, applied last (so they may replace `Accept` or `Content-Type`).
  public var headers: [String: String]
  /// How long one exchange may take, from the start of the request to the last byte of the
  /// reply. Default 5 seconds. It is also set as `URLRequest.timeoutInterval`.
  public var timeout: Duration
  /// The most reply bytes read; a longer reply fails with
  /// ``TokenExchangeError/Code-swift.struct/bodyTooLarge``. Default 1 MiB.
  public var maxBodySize: Int
  /// The session requests run on.
  public var session: URLSession
  /// The wall clock `expires_in` counts from. Default `Date()`.
  public var now: @Sendable () -> Date
  /// Whether a redirect to the endpoint's own origin (same host and port, `https` on both
  /// sides) may be followed. Default `false`: every redirect is refused with
  /// ``TokenExchangeError/Code-swift.struct/redirectRefused``. A redirect to another origin,
  /// or over plain `http`, is refused whatever this says.
  public var allowsSameOriginHTTPSRedirects: Bool

  /// Creates an exchanger.
  ///
  /// - Parameters:
  ///   - endpoint: The integrator's token endpoint.
  ///   - encoding: How parameters are sent; `POST` form by default.
  ///   - codeParameter: The auth-code parameter name; `auth_code` by default.
  ///   - mcUidParameter: The host-app user id parameter name; `mc_uid` by default.
  ///   - parameters: Static parameters sent with every exchange.
  ///   - headers: Extra request headers.
  ///   - timeout: How long the whole request may take; 5 seconds by default.
  ///   - maxBodySize: The most reply bytes read; 1 MiB by default.
  ///   - session: The session to use; by default one shared ephemeral session (no cookies, no
  ///     cache) per process.
  ///   - allowsSameOriginHTTPSRedirects: Whether to follow a redirect to the endpoint's own
  ///     HTTPS origin; `false` by default (every redirect is refused).
  ///   - now: The wall-clock source for `expiresAt`; `Date()` by default.
  public init(
    endpoint: URL,
    encoding: Encoding = .postForm,
    codeParameter: String = "auth_code",
    mcUidParameter: String = "mc_uid",
    parameters: [String: String] = [:],
    headers: [String: String] = [:],
    timeout: Duration = .seconds(5),
    maxBodySize: Int = 1 << 20,
    session: URLSession? = nil,
    allowsSameOriginHTTPSRedirects: Bool = false,
    now: @escaping @Sendable () -> Date = { Date() }
  ) {
    self.endpoint = endpoint
    self.encoding = encoding
    self.codeParameter = codeParameter
    self.mcUidParameter = mcUidParameter
    self.parameters = parameters
    self.headers = headers
    self.timeout = timeout
    self.maxBodySize = maxBodySize
    self.session = session ?? Self.defaultSession
    self.now = now
    self.allowsSameOriginHTTPSRedirects = allowsSameOriginHTTPSRedirects
  }

  /// One ephemeral session for every exchanger that was not given one.
  /// One ephemeral session (no cookies, no cache) per process, for every exchanger and
  /// refresher that was not given one.
  static let defaultSession: URLSession = {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.urlCache = nil
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.httpShouldSetCookies = false
    return URLSession(configuration: configuration)
  }()

  /// Sends `code` to the server once and decodes the model it answers with.
  ///
  /// - Parameters:
  ///   - code: The one-time code; never logged, never sent twice.
  ///   - request: The authorization; its key's `mcUid` is sent and checked against the reply.
  /// - Returns: The model: `uid` and `accessToken` from the reply, `mcUid` from the reply or
  ///   else the key, `expiresAt` = ``now`` + `expires_in` when the reply has one.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` with code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/timedOut`` for a request timeout
  ///   and ``AuthCoordinator/AuthCoordinatorError/Code/exchangeFailed`` otherwise, with a
  ///   ``TokenExchangeError`` attached; `CancellationError` when the Task is cancelled.
  public func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws
    -> AuthModel
  {
    let key = request.key
    let urlRequest = try makeRequest(code: code, key: key)
    try Task.checkCancellation()
    let redirects = RedirectPolicy(
      endpoint: endpoint, allowsSameOriginHTTPS: allowsSameOriginHTTPSRedirects)
    let outcome = try await BoundedDataTask.run(
      urlRequest, on: session, limit: maxBodySize, timeout: timeout.seconds,
      redirects: redirects)
    return try model(from: outcome, code: code, key: key)
  }

  // MARK: - Request

  /// The parameters in the order they are sent: the static ones sorted by name, then the
  /// mcUid, then the code.
  func orderedParameters(code: AuthCode, key: AccountKey) -> [(String, String)] {
    let reserved: Set = [codeParameter, mcUidParameter]
    var items = parameters.filter { !reserved.contains($0.key) }.sorted { $0.key < $1.key }
      .map { ($0.key, $0.value) }
    items.append((mcUidParameter, key.mcUid))
    items.append((codeParameter, code.value))
    return items
  }

  /// Builds the HTTP request for one exchange.
  ///
  /// - Parameters:
  ///   - code: The auth code.
  ///   - key: The account.
  /// - Returns: The request.
  /// - Throws: ``/AuthCoordinator/AuthCoordinatorError`` (exchange failed, transport
  ///   `badURL`) when the endpoint cannot carry a query.
  package func makeRequest(code: AuthCode, key: AccountKey) throws -> URLRequest {
    let items = orderedParameters(code: code, key: key)
    let form = FormEncoding.form(items)
    var url = endpoint
    if encoding == .getQuery {
      guard var components = URLComponents(url: endpoint, resolvingAgainstBaseURL: true) else {
        throw Self.failure(
          .exchangeFailed, "the endpoint URL cannot carry a query",
          TokenExchangeError(.transport, urlErrorCode: URLError.badURL.rawValue))
      }
      let existing = components.percentEncodedQuery.map { $0.isEmpty ? "" : $0 + "&" } ?? ""
      components.percentEncodedQuery = existing + form
      guard let withQuery = components.url else {
        throw Self.failure(
          .exchangeFailed, "the endpoint URL cannot carry a query",
          TokenExchangeError(.transport, urlErrorCode: URLError.badURL.rawValue))
      }
      url = withQuery
    }
    var urlRequest = URLRequest(
      url: url, cachePolicy: .reloadIgnoringLocalCacheData,
      timeoutInterval: timeout.seconds)
    urlRequest.setValue("application/json", forHTTPHeaderField: "Accept")
    switch encoding {
    case .getQuery:
      urlRequest.httpMethod = "GET"
    case .postForm:
      urlRequest.httpMethod = "POST"
      urlRequest.setValue(
        "application/x-www-form-urlencoded; charset=utf-8", forHTTPHeaderField: "Content-Type")
      urlRequest.httpBody = Data(form.utf8)
    case .postJSON:
      urlRequest.httpMethod = "POST"
      urlRequest.setValue("application/json; charset=utf-8", forHTTPHeaderField: "Content-Type")
      urlRequest.httpBody = Self.jsonObject(items)
    }
    for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
      urlRequest.setValue(value, forHTTPHeaderField: name)
    }
    return urlRequest
  }

  /// Percent-encodes everything but RFC 3986's unreserved characters (so `+`, `&`, `=` and
  /// spaces in a code survive a form or query).
  static func formEncode(_ text: String) -> String {
    FormEncoding.encode(text)
  }

  /// A JSON object of strings with its keys in a stable order.
  static func jsonObject(_ items: [(String, String)]) -> Data {
    let object = Dictionary(items, uniquingKeysWith: { _, last in last })
    guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    else {
      preconditionFailure("Internal inconsistency: a dictionary of strings is valid JSON")
    }
    return data
  }
}
