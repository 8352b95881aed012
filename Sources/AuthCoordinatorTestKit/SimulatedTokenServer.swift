import AuthCoordinatorOAuth2
import Foundation
import HTTPSupport
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A SIMULATION of an OAuth 2 token endpoint, in process: an ``/AuthCoordinatorOAuth2/HTTPTransport``
/// that answers the token requests of a real `OAuth2Authorizer` with no socket, on any clock (a
/// ``ManualClock`` in a test, a virtual clock in `authcoord simulate --service`).
///
/// Only the server is simulated: the authorizer's form, its grant choice and its reply parsing
/// are the real code, which reads the JSON this server writes.
///
/// - `grant_type=client_credentials` starts a new token *family* (an access token and a refresh
///   token).
/// - `grant_type=refresh_token` ROTATES: each refresh token may be used once and is replaced by
///   a new one of the same family. Presenting a spent one again is a reuse: the server revokes
///   the whole family (its access tokens and its refresh tokens), counts the reuse and answers
///   `invalid_grant`, as OAuth 2 security best practice has servers do (RFC 9700 §4.14.2).
/// - `grant_type=urn:ietf:params:oauth:grant-type:token-exchange` (RFC 8693) starts a new family
///   when its `subject_token` (and `actor_token`, if any) is an active token this server issued
///   or one of ``acceptedSubjectTokens``, and its `subject_token_type` is present. It answers
///   the `requested_token_type` as `issued_token_type` (an access token when none was asked;
///   ``issuedTokenTypeOverride`` to answer another), `token_type` `Bearer` for an access token
///   or a JWT and `N_A` otherwise, and a rotating refresh token. An unknown token is refused
///   with `invalid_grant`.
/// - `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer` (RFC 7523 §2.1) starts a new
///   family when ``assertionValidator`` accepts the `assertion`. An assertion is one-time: one
///   presented before (accepted or not) is refused with `invalid_grant` and counted as a replay.
/// - A form with `token` and no `grant_type` is a revocation (RFC 7009): a refresh token's
///   whole family is revoked, an access token alone; the answer is 200 for any token.
/// - A grant takes effect when the request arrives (a refresh token is spent then); the answer
///   comes ``responseDelay`` later on the clock. A delay past the request's
///   ``/AuthCoordinatorOAuth2/HTTPTransportRequest/timeout`` ends it with `URLError(.timedOut)` at
///   the timeout, as a real transport would; the grant still took effect.
///
/// Tokens are opaque strings (`simulated-access-…`, `simulated-refresh-…`); ``status(of:)``
/// says whether an access token is active (``SimulatedResourceServer`` asks it).
public final class SimulatedTokenServer: HTTPTransport, @unchecked Sendable {
  /// The server's counters.
  public struct Counters: Sendable, Equatable {
    /// Token requests received, whatever their answer.
    public var tokenRequests = 0
    /// `client_credentials` grants issued (each a new token family).
    public var clientCredentialsGrants = 0
    /// `refresh_token` grants issued (each a rotation).
    public var refreshTokenGrants = 0
    /// Token-exchange grants issued (each a new token family).
    public var tokenExchangeGrants = 0
    /// JWT-bearer grants issued (each a new token family).
    public var jwtBearerGrants = 0
    /// JWT-bearer assertions presented again (refused with `invalid_grant`).
    public var replayedAssertions = 0
    /// Token requests per `grant_type` as sent, whatever their answer (outages included).
    public var requestsByGrantType: [String: Int] = [:]
    /// Refresh tokens presented again after they were spent.
    public var reuses = 0
    /// `invalid_grant` answers (reuses included).
    public var invalidGrants = 0
    /// Token families revoked because of a reuse.
    public var familiesRevoked = 0
    /// Revocation requests (RFC 7009) answered, whatever the token.
    public var revocations = 0
    /// Token requests per `audience` they asked for (RFC 8693's parameter; the first RFC 8707
    /// `resource` when there is no audience); requests that named neither are not counted.
    public var requestsByAudience: [String: Int] = [:]

    /// All zero.
    public init() {}

    /// The counts of `self` since `earlier`.
    ///
    /// - Parameter earlier: A snapshot taken before this one.
    /// - Returns: The differences, field by field.
    public func since(_ earlier: Counters) -> Counters {
      var delta = Counters()
      delta.tokenRequests = tokenRequests - earlier.tokenRequests
      delta.clientCredentialsGrants = clientCredentialsGrants - earlier.clientCredentialsGrants
      delta.refreshTokenGrants = refreshTokenGrants - earlier.refreshTokenGrants
      delta.tokenExchangeGrants = tokenExchangeGrants - earlier.tokenExchangeGrants
      delta.jwtBearerGrants = jwtBearerGrants - earlier.jwtBearerGrants
      delta.replayedAssertions = replayedAssertions - earlier.replayedAssertions
      for (grant, count) in requestsByGrantType {
        let change = count - (earlier.requestsByGrantType[grant] ?? 0)
        if change != 0 { delta.requestsByGrantType[grant] = change }
      }
      delta.reuses = reuses - earlier.reuses
      delta.invalidGrants = invalidGrants - earlier.invalidGrants
      delta.familiesRevoked = familiesRevoked - earlier.familiesRevoked
      delta.revocations = revocations - earlier.revocations
      for (audience, count) in requestsByAudience {
        let change = count - (earlier.requestsByAudience[audience] ?? 0)
        if change != 0 { delta.requestsByAudience[audience] = change }
      }
      return delta
    }
  }

  /// An outage: while one is set (``outage``), every token request is answered with it, and
  /// no grant takes effect.
  public struct Outage: Sendable, Equatable {
    /// The HTTP status, such as 503 or 429.
    public var status: Int
    /// The `Retry-After` header's value (`"7"`, or an HTTP-date), or `nil` for none.
    public var retryAfter: String?
    /// The OAuth 2 `error` of the JSON body, or `nil` for an empty body.
    public var error: String?

    /// Creates an outage.
    ///
    /// - Parameters:
    ///   - status: The HTTP status.
    ///   - retryAfter: The `Retry-After` value, if any.
    ///   - error: The OAuth 2 error code of the body, if any.
    public init(status: Int, retryAfter: String? = nil, error: String? = nil) {
      self.status = status
      self.retryAfter = retryAfter
      self.error = error
    }
  }

  /// One token-exchange request as the server received it (tokens included: this is a test
  /// server; it never logs them).
  public struct TokenExchangeRecord: Sendable, Equatable {
    /// The `subject_token`.
    public var subjectToken: String
    /// The `subject_token_type`, or `nil` when missing.
    public var subjectTokenType: String?
    /// The `actor_token`, if any.
    public var actorToken: String?
    /// The `actor_token_type`, if any.
    public var actorTokenType: String?
    /// The `requested_token_type`, if any.
    public var requestedTokenType: String?
    /// The `scope`, if any.
    public var scope: String?
    /// The `audience`, if any.
    public var audience: String?
  }

  /// Whether an access token may be used.
  public typealias TokenStatus = RotatingTokenIssuer.AccessStatus

  private let clock: any Clock<Duration>
  private let tokenLifetime: Duration
  private let date: @Sendable () -> Date
  private let log: @Sendable (String) -> Void
  private let state: LockedState<State>

  /// Creates a server.
  ///
  /// - Parameters:
  ///   - clock: The clock the response delay is measured on.
  ///   - responseDelay: How long the server takes to answer; none by default.
  ///   - tokenLifetime: The `expires_in` of every access token.
  ///   - date: The wall-clock date access tokens expire by (move it with the clock).
  ///   - log: Where the server's lines go (never a token); nowhere by default.
  public init(
    clock: any Clock<Duration>, responseDelay: Duration = .zero, tokenLifetime: Duration,
    date: @escaping @Sendable () -> Date, log: @escaping @Sendable (String) -> Void = { _ in }
  ) {
    self.clock = clock
    self.tokenLifetime = tokenLifetime
    self.date = date
    self.log = log
    state = LockedState(State(delay: responseDelay))
  }

  /// How long the server takes to answer a token request; it can change while requests run.
  public var responseDelay: Duration {
    get { state.withLock { $0.delay } }
    set { state.withLock { $0.delay = newValue } }
  }

  /// Whether replies state the expiry as an absolute `expires_at` (seconds since 1970, on
  /// the server's `date`) instead of a relative `expires_in`. Default `false`.
  public var statesAbsoluteExpiry: Bool {
    get { state.withLock { $0.statesAbsoluteExpiry } }
    set { state.withLock { $0.statesAbsoluteExpiry = newValue } }
  }

  /// The counters so far.
  public var counters: Counters { state.withLock { $0.counters } }

  /// The outage in progress, or `nil` when the server answers normally. Set it to take the
  /// server down; set it back to `nil` to bring it up.
  public var outage: Outage? {
    get { state.withLock { $0.outage } }
    set { state.withLock { $0.outage = newValue } }
  }

  /// Subject (and actor) tokens a token exchange accepts besides the active access tokens and
  /// live refresh tokens this server issued: an upstream identity provider's tokens. Empty by
  /// default.
  public var acceptedSubjectTokens: Set<String> {
    get { state.withLock { $0.acceptedSubjectTokens } }
    set { state.withLock { $0.acceptedSubjectTokens = newValue } }
  }

  /// Whether a JWT-bearer assertion presented for the first time is valid (its signature,
  /// issuer and audience, as the test decides). By default any non-empty assertion. A replayed
  /// assertion is refused before this is asked.
  public var assertionValidator: @Sendable (String) -> Bool {
    get { state.withLock { $0.assertionValidator } }
    set { state.withLock { $0.assertionValidator = newValue } }
  }

  /// The `issued_token_type` every token exchange answers, whatever was requested; `nil` (the
  /// default) answers the requested type, or an access token.
  public var issuedTokenTypeOverride: String? {
    get { state.withLock { $0.issuedTokenTypeOverride } }
    set { state.withLock { $0.issuedTokenTypeOverride = newValue } }
  }

  /// The JWT-bearer assertions received, in order, replays included.
  public var assertions: [String] { state.withLock { $0.assertions } }

  /// The token-exchange requests received, in order, refused ones included.
  public var tokenExchanges: [TokenExchangeRecord] { state.withLock { $0.exchanges } }

  /// The token endpoint: a `POST` of an `application/x-www-form-urlencoded` form.
  ///
  /// - Parameter request: The token request and its limits (its timeout is honoured on the
  ///   server's clock).
  /// - Returns: A JSON reply: the tokens (200), or an OAuth 2 error (400).
  /// - Throws: `URLError(.timedOut)` when the response delay is past the request's timeout;
  ///   `CancellationError` when the calling task is cancelled.
  public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    try Task.checkCancellation()
    let form = Self.form(request.urlRequest.httpBody ?? Data())
    if form["grant_type"] == nil, let token = form["token"] {
      return try revoke(token, request: request)
    }
    let (answer, delay, number) = state.withLock { state in
      state.counters.tokenRequests += 1
      state.counters.requestsByGrantType[form["grant_type"] ?? "", default: 0] += 1
      if let audience = form["audience"] ?? form["resource"] {
        state.counters.requestsByAudience[audience, default: 0] += 1
      }
      let answer =
        state.outage.map { Answer.outage($0) }
        ?? Self.apply(form, to: &state, date: date(), lifetime: tokenLifetime)
      return (answer, state.delay, state.counters.tokenRequests)
    }
    if let timeout = request.timeout, delay > timeout {
      try await clock.sleep(for: timeout)
      log("token server: token request #\(number) timed out at the client")
      throw URLError(.timedOut)
    }
    try await clock.sleep(for: delay)
    let status: Int
    let object: [String: Any]
    var headers = ["Date": RetryAfter.imfFixdate(date())]
    switch answer {
    case .outage(let outage):
      log("token server: token request #\(number) answered \(outage.status) (outage)")
      status = outage.status
      object = outage.error.map { ["error": $0] } ?? [:]
      if let retryAfter = outage.retryAfter { headers["Retry-After"] = retryAfter }
    case .tokens(let access, let refresh, let family, let grant, let extra):
      log("token server: \(grant) grant (token request #\(number)): \(family)")
      status = 200
      var tokens: [String: Any] = [
        "access_token": access, "token_type": "Bearer", "refresh_token": refresh,
      ]
      for (name, value) in extra { tokens[name] = value }
      let (absolute, expiresAt) = state.withLock {
        ($0.statesAbsoluteExpiry, $0.issuer.expiry(ofAccessToken: access))
      }
      if absolute, let expiresAt {
        tokens["expires_at"] = expiresAt.timeIntervalSince1970
      } else {
        tokens["expires_in"] = Int(tokenLifetime.components.seconds)
      }
      object = tokens
    case .error(let code, let error, let description):
      log("token server: token request #\(number) refused: \(error) (\(description))")
      status = code
      object = ["error": error, "error_description": description]
    }
    let body = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    return .complete(
      Self.response(
        to: request.urlRequest, status: status, contentType: "application/json",
        headers: headers),
      body)
  }

  /// The token endpoint over HTTP, for a real `URLSession` client: the same answers as
  /// ``send(_:)``, on a loopback socket. Serve it with
  /// `LoopbackHTTPServer(handler: server.handle)`. The response delay is waited for on the
  /// server's clock; the client's own timeout bounds the request.
  ///
  /// - Parameter request: The request.
  /// - Returns: The JSON reply; 503 when the handling task was cancelled.
  public func handle(_ request: LoopbackHTTPRequest) async -> LoopbackHTTPResponse {
    var urlRequest = URLRequest(
      url: URL(string: "http://127.0.0.1")!.appendingPathComponent(request.path))
    urlRequest.httpMethod = request.method
    urlRequest.httpBody = request.body
    let outcome: HTTPTransportOutcome
    do {
      outcome = try await send(HTTPTransportRequest(urlRequest, maxBodySize: .max, timeout: nil))
    } catch {
      return LoopbackHTTPResponse(status: 503)
    }
    switch outcome {
    case .complete(let response, let body), .truncated(let response, let body):
      let http = response as? HTTPURLResponse
      var headers: [String: String] = [:]
      for case (let name as String, let value as String) in http?.allHeaderFields ?? [:] {
        headers[name] = value
      }
      return LoopbackHTTPResponse(status: http?.statusCode ?? 500, headers: headers, body: body)
    case .redirectRefused(let status):
      return LoopbackHTTPResponse(status: status)
    }
  }

  /// The revocation endpoint (RFC 7009): a form with `token` (and an optional
  /// `token_type_hint`) and no `grant_type`. Revoking a refresh token revokes its whole family
  /// (its access tokens and refresh tokens, RFC 7009 §2.1); revoking an access token revokes
  /// it alone. Always 200, for an unknown token too (§2.2); during an outage, the outage's
  /// answer.
  private func revoke(_ token: String, request: HTTPTransportRequest) throws
    -> HTTPTransportOutcome
  {
    let outage: Outage? = state.withLock { state in
      if let outage = state.outage { return outage }
      state.counters.revocations += 1
      state.issuer.revoke(token)
      return nil
    }
    if let outage {
      log("token server: revocation answered \(outage.status) (outage)")
      return .complete(
        Self.response(to: request.urlRequest, status: outage.status, contentType: "text/plain"),
        Data())
    }
    log("token server: a token was revoked (RFC 7009)")
    return .complete(
      Self.response(to: request.urlRequest, status: 200, contentType: "text/plain"), Data())
  }

  /// Whether `accessToken` is active now.
  ///
  /// - Parameter accessToken: An access token.
  /// - Returns: Its status at the server's date.
  public func status(of accessToken: String) -> TokenStatus {
    let now = date()
    return state.withLock { $0.issuer.status(ofAccessToken: accessToken, at: now) }
  }

  /// Revokes every access token issued so far; refresh tokens stay valid.
  ///
  /// - Returns: How many active access tokens were revoked.
  @discardableResult public func revokeAccessTokens() -> Int {
    let now = date()
    return state.withLock { $0.issuer.revokeAllAccessTokens(at: now) }
  }

  /// The fields of a form body (`application/x-www-form-urlencoded`).
  static func form(_ body: Data) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1).map {
        String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
      }
      fields[parts[0]] = parts.count > 1 ? parts[1] : ""
    }
    return fields
  }

  /// A response to `request` with `status`.
  static func response(
    to request: URLRequest, status: Int, contentType: String, headers: [String: String] = [:]
  ) -> HTTPURLResponse {
    let url = request.url ?? URL(string: "https://simulated.invalid/")!
    var fields = headers
    fields["Content-Type"] = contentType
    guard
      let response = HTTPURLResponse(
        url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)
    else { preconditionFailure("HTTPURLResponse refused a valid status \(status)") }
    return response
  }
}
