import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An HTTP client that sends each request with the account's bearer token and, when the server
/// rejects the token, refreshes it once through the coordinator and retries once: the Swift
/// counterpart of Go's `oauth2.Transport` and Alamofire's `AuthenticationInterceptor`.
///
/// ```swift
/// let client = BearerClient(
///   coordinator: coordinator, key: AccountKey(account: "reports-service"),
///   origin: URL(string: "https://reports.example.com")!)
/// let (data, response) = try await client.data(for: URLRequest(url: resourceURL))
/// guard response.statusCode == 200 else { throw MyError.refused(response.statusCode) }
/// ```
///
/// For each request it asks ``AuthCoordinator/authModel(for:refresh:timeout:)`` for the model
/// (a cache hit while the token is valid), sets `Authorization: Bearer <access token>`,
/// replacing any `Authorization` header the request had, and sends it on its `URLSession`.
/// When the answer's status is in ``rejectedStatuses`` (default `[401]`), it asks the
/// coordinator for a forced refresh that rejects exactly the token it sent
/// (``RefreshPolicy/force(rejecting:)``) and sends the request once more with the new token.
/// Whatever that retry answers, a second 401 included, is returned as it is: there is never a
/// second refresh or a third send for one call. The answer to the first send is returned
/// without a refresh when its `WWW-Authenticate` says `error="insufficient_scope"` (RFC 6750
/// §3.1: a new token would not have more scope), and without a retry when the refreshed token
/// is the rejected one, or when the request has an `httpBodyStream` (a stream can be read only
/// once, so the request cannot be replayed).
///
/// The client is made for one API, its ``origin`` (scheme, host and port), and its token never
/// goes anywhere else: a request for a URL of another origin throws
/// ``AuthCoordinatorError/Code-swift.struct/originMismatch`` before anything is sent or a token
/// is obtained; a redirect to another origin is followed without the `Authorization` header (a
/// redirect back to the origin carries it again); and only a rejected status from the origin
/// itself triggers the refresh: an answer from elsewhere is returned as it is. Every call is
/// bounded by ``deadline`` (60 seconds by default), whatever the server does.
///
/// Concurrent rejections of one token coalesce in the coordinator: however many requests get a
/// 401 for the same token, the account is authorized once, and a request whose token was
/// already replaced is served the new one without another authorization.
///
/// The client holds no token: its description and reflection show the account key and the
/// rejected statuses only, and the errors it throws never contain a token.
public struct BearerClient: Sendable {
  /// The coordinator that supplies and refreshes the tokens.
  public let coordinator: AuthCoordinator
  /// The account whose token is attached.
  public let key: AccountKey
  /// The origin (scheme, host and port) of the API the client is made for: the only one its
  /// token is sent to. Its path, query and fragment are ignored.
  public let origin: URL
  /// The session whose configuration the requests use (on Apple platforms, the requests run on
  /// it, with a per-task delegate; on Linux, on one session the client makes from its
  /// configuration). Not used when the client was given another ``transport``.
  public let session: URLSession
  /// Where the requests go: a ``URLSessionTransport`` on ``session`` unless the client was
  /// given another (an in-process API in a test or a simulation).
  public let transport: any HTTPTransport
  /// The status codes that mean "the token was rejected": an answer with one of them triggers
  /// the one refresh and the one retry. Default `[401]`.
  public let rejectedStatuses: Set<Int>
  /// The most time one call may take, from its start to the last byte of its last answer:
  /// obtaining the token, the send, the refresh and the retry together. When it passes, the
  /// request in flight is cancelled and the call throws
  /// ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/timedOut`` (transient). Default
  /// 60 seconds.
  public let deadline: Duration
  /// The clock ``deadline`` is measured on.
  let clock: any Clock<Duration>

  /// Creates a client for one account and one API.
  ///
  /// ```swift
  /// let client = BearerClient(
  ///   coordinator: coordinator, key: AccountKey(account: "reports-service"),
  ///   origin: URL(string: "https://reports.example.com")!, deadline: .seconds(10))
  /// ```
  ///
  /// - Parameters:
  ///   - coordinator: Supplies the account's model and refreshes it when a token is rejected.
  ///   - key: The account whose access token is attached.
  ///   - origin: The API's origin: a URL whose scheme, host and port are the only ones the
  ///     token is sent to (`https://api.example.com`; a path is ignored).
  ///   - session: The session whose configuration the requests use. Default
  ///     `URLSession.shared`. Not used when `transport` is given.
  ///   - transport: Where the requests go; by default a ``URLSessionTransport`` on `session`.
  ///   - rejectedStatuses: The statuses that mean the token was rejected. Default `[401]`; add
  ///     `403` for a server that answers an expired token with it.
  ///   - deadline: The most time one call may take, everything included. Default 60 seconds.
  ///   - clock: The clock the deadline is measured on. Default `ContinuousClock()`; a test
  ///     may pass a manual clock.
  public init(
    coordinator: AuthCoordinator,
    key: AccountKey,
    origin: URL,
    session: URLSession = .shared,
    transport: (any HTTPTransport)? = nil,
    rejectedStatuses: Set<Int> = [401],
    deadline: Duration = .seconds(60),
    clock: any Clock<Duration> = ContinuousClock()
  ) {
    self.coordinator = coordinator
    self.key = key
    self.origin = origin
    self.session = session
    self.rejectedStatuses = rejectedStatuses
    self.deadline = deadline
    self.clock = clock
    self.transport = transport ?? URLSessionTransport(session: session)
  }

  /// Sends `request` with the account's bearer token, refreshing the token and retrying once
  /// when the server rejects it.
  ///
  /// Any `Authorization` header of `request` is replaced by `Bearer <access token>`. The
  /// request's URL must have the client's ``origin``; a redirect to another origin is followed
  /// without the token, and its answer is returned as it is (a 401 from there refreshes
  /// nothing).
  ///
  /// ```swift
  /// var request = URLRequest(url: URL(string: "https://api.example.com/me")!)
  /// request.setValue("application/json", forHTTPHeaderField: "Accept")
  /// let (data, response) = try await client.data(for: request)
  /// ```
  ///
  /// - Parameter request: The request to send; its `Authorization` header is overwritten.
  /// - Returns: The body and the HTTP response of the last send: the first one when its status
  ///   is not in ``rejectedStatuses``, when the refreshed token is the rejected one, or when the
  ///   request has an `httpBodyStream`, or when the answer came from another origin (after a
  ///   redirect); the retry's otherwise, whatever its status.
  /// - Throws: ``AuthCoordinatorError`` with code
  ///   ``AuthCoordinatorError/Code-swift.struct/originMismatch`` (terminal, nothing sent) when
  ///   the request's URL is not of the client's ``origin``; with code
  ///   ``/AuthCoordinator/AuthCoordinatorError/Code-swift.struct/timedOut`` (transient) when
  ///   ``deadline`` passed; the coordinator's ``AuthCoordinatorError``, unchanged, when no token could be
  ///   obtained or refreshed; the `URLError` of a send that failed in transport; an
  ///   ``AuthCoordinatorError`` with code
  ///   ``AuthCoordinatorError/Code-swift.struct/nonHTTPResponse`` when the answer is not an HTTP
  ///   response (a `data:` or `file:` URL, say); `CancellationError` when the calling task is
  ///   cancelled, which also cancels the request in flight.
  public func data(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
    guard let url = request.url, RedirectPolicy.sameOrigin(origin, url) else {
      throw AuthCoordinatorError(
        .originMismatch,
        "the request for \(Self.redacted(request.url)) is not for the client's origin "
          + "\(Self.originText(origin)); nothing was sent", transient: false)
    }
    return try await withDeadline(for: url) { try await exchange(request) }
  }

  /// The call itself: the token, the send, and the one refresh and retry.
  private func exchange(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
    let model = try await coordinator.authModel(for: key)
    let rejected = model.accessToken
    let first = try await send(request, bearer: rejected)
    guard rejectedStatuses.contains(first.1.statusCode), request.httpBodyStream == nil,
      isFromOrigin(first.1), !Self.isInsufficientScope(first.1)
    else {
      return first
    }
    let fresh = try await coordinator.authModel(for: key, refresh: .force(rejecting: rejected))
    guard fresh.accessToken != rejected else { return first }
    return try await send(request, bearer: fresh.accessToken)
  }

  /// Sends a `GET` request for `url` with the account's bearer token, as
  /// ``data(for:)`` does.
  ///
  /// ```swift
  /// let (data, response) = try await client.data(from: URL(string: "https://api.example.com/me")!)
  /// ```
  ///
  /// - Parameter url: The resource to get.
  /// - Returns: The body and the HTTP response, as ``data(for:)`` returns them.
  /// - Throws: What ``data(for:)`` throws.
  public func data(from url: URL) async throws -> (Data, HTTPURLResponse) {
    try await data(for: URLRequest(url: url))
  }

  /// Whether the answer came from the client's origin (not from where a redirect led).
  private func isFromOrigin(_ response: HTTPURLResponse) -> Bool {
    guard let url = response.url else { return true }
    return RedirectPolicy.sameOrigin(origin, url)
  }

  /// Whether the answer's `WWW-Authenticate` says `error="insufficient_scope"` (RFC 6750
  /// §3.1): the token is valid but does not grant the request, and a new token would not either.
  static func isInsufficientScope(_ response: HTTPURLResponse) -> Bool {
    guard let header = response.value(forHTTPHeaderField: "WWW-Authenticate") else {
      return false
    }
    return header.range(
      of: #"(?i)(^|[\s,])error\s*=\s*"?insufficient_scope"?"#, options: .regularExpression) != nil
  }

  /// Runs `body`, ending it when ``deadline`` passes.
  private func withDeadline(
    for url: URL, _ body: @escaping @Sendable () async throws -> (Data, HTTPURLResponse)
  ) async throws -> (Data, HTTPURLResponse) {
    let deadline = deadline
    let clock = clock
    let answer = try await withThrowingTaskGroup(
      of: (Data, HTTPURLResponse)?.self, returning: (Data, HTTPURLResponse)?.self
    ) { group in
      group.addTask { try await body() }
      group.addTask {
        try await clock.sleep(for: deadline)
        return nil
      }
      defer { group.cancelAll() }
      guard let first = try await group.next() else { return nil }
      return first
    }
    guard let answer else {
      throw AuthCoordinatorError(
        .timedOut,
        "the call to \(Self.redacted(url)) did not finish within its deadline of \(deadline)",
        transient: true)
    }
    return answer
  }

  /// Sends `request` once with `token` as its bearer token.
  private func send(_ request: URLRequest, bearer token: String) async throws -> (
    Data, HTTPURLResponse
  ) {
    var authorized = request
    let authorization = "Bearer \(token)"
    authorized.setValue(authorization, forHTTPHeaderField: "Authorization")
    let origin = origin
    try Task.checkCancellation()
    let outcome = try await transport.send(
      HTTPTransportRequest(
        authorized, maxBodySize: .max, timeout: nil,
        redirect: { _, next in
          var next = next
          if let target = next.url, RedirectPolicy.sameOrigin(origin, target) {
            next.setValue(authorization, forHTTPHeaderField: "Authorization")
          } else {
            // Another origin never sees the token (swift-corelibs-foundation copies the header).
            next.setValue(nil, forHTTPHeaderField: "Authorization")
          }
          return next
        }))
    let data: Data
    let response: URLResponse
    switch outcome {
    case .complete(let answer, let body), .truncated(let answer, let body):
      (response, data) = (answer, body)
    case .redirectRefused(let status):
      // The client follows every redirect; a transport that did not broke its contract.
      throw AuthCoordinatorError(
        .networkError,
        "the transport did not follow a redirect (HTTP \(status)) from "
          + "\(Self.redacted(request.url))", transient: false)
    }
    guard let http = response as? HTTPURLResponse else {
      throw AuthCoordinatorError(
        .nonHTTPResponse,
        "the answer to \(Self.redacted(request.url)) is not an HTTP response",
        transient: false)
    }
    return (data, http)
  }

  /// `scheme://host[:port]` of `url`, for a message.
  static func originText(_ url: URL) -> String {
    guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else {
      return "(a URL without a host)"
    }
    return "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
  }

  /// `url` for a message (``URLRedaction``).
  static func redacted(_ url: URL?) -> String {
    url.map(URLRedaction.redacted) ?? "a request without a URL"
  }
}

extension AuthCoordinatorError.Code {
  /// The answer to a ``BearerClient`` request was not an HTTP response (the request's URL is not
  /// an `http` or `https` URL, say). Terminal: retrying the same request gives the same answer.
  public static let nonHTTPResponse = Self(rawValue: "non_http_response")

  /// A ``BearerClient`` was asked to send a request for a URL whose origin (scheme, host,
  /// port) is not the client's ``BearerClient/origin``. Nothing was sent and no token was
  /// obtained: the client sends its token to its own API only. Terminal.
  public static let originMismatch = Self(rawValue: "origin_mismatch")
}

extension BearerClient: CustomStringConvertible, CustomDebugStringConvertible,
  CustomReflectable
{
  /// `BearerClient(key: <account key>, origin: https://api.example.com, rejectedStatuses:
  /// [401], deadline: 60.0 seconds)`: no token, which the client never holds anyway.
  public var description: String {
    "BearerClient(key: \(key), origin: \(Self.originText(origin)), rejectedStatuses: "
      + "\(rejectedStatuses.sorted()), deadline: \(deadline))"
  }

  /// The same as ``description``.
  public var debugDescription: String { description }

  /// The key, the origin, the rejected statuses and the deadline only, so that `dump(client)`
  /// does not walk into the coordinator and its cached models.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "key": key, "origin": Self.originText(origin),
        "rejectedStatuses": rejectedStatuses.sorted(), "deadline": deadline,
      ],
      displayStyle: .struct)
  }
}
