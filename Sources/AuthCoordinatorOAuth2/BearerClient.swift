import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// An HTTP client that sends each request with the account's bearer token and, when the server
/// rejects the token, refreshes it once through the coordinator and retries once: the Swift
/// counterpart of Go's `oauth2.Transport` and Alamofire's `AuthenticationInterceptor`.
///
/// ```swift
/// let client = BearerClient(coordinator: coordinator, key: AccountKey(account: "reports-service"))
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
/// without a retry when the refreshed token is the rejected one, or when the request has an
/// `httpBodyStream` (a stream can be read only once, so the request cannot be replayed).
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
  /// The session the requests are sent on.
  public let session: URLSession
  /// The status codes that mean "the token was rejected": an answer with one of them triggers
  /// the one refresh and the one retry. Default `[401]`.
  public let rejectedStatuses: Set<Int>

  /// Creates a client for one account.
  ///
  /// - Parameters:
  ///   - coordinator: Supplies the account's model and refreshes it when a token is rejected.
  ///   - key: The account whose access token is attached.
  ///   - session: Where the requests are sent. Default `URLSession.shared`.
  ///   - rejectedStatuses: The statuses that mean the token was rejected. Default `[401]`; add
  ///     `403` for a server that answers an expired token with it.
  public init(
    coordinator: AuthCoordinator,
    key: AccountKey,
    session: URLSession = .shared,
    rejectedStatuses: Set<Int> = [401]
  ) {
    self.coordinator = coordinator
    self.key = key
    self.session = session
    self.rejectedStatuses = rejectedStatuses
  }

  /// Sends `request` with the account's bearer token, refreshing the token and retrying once
  /// when the server rejects it.
  ///
  /// Any `Authorization` header of `request` is replaced by `Bearer <access token>`.
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
  ///   request has an `httpBodyStream`; the retry's otherwise, whatever its status.
  /// - Throws: The coordinator's ``AuthCoordinatorError``, unchanged, when no token could be
  ///   obtained or refreshed; the `URLError` of a send that failed in transport; an
  ///   ``AuthCoordinatorError`` with code
  ///   ``AuthCoordinatorError/Code-swift.struct/nonHTTPResponse`` when the answer is not an HTTP
  ///   response (a `data:` or `file:` URL, say); `CancellationError` when the calling task is
  ///   cancelled, which also cancels the request in flight.
  public func data(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
    let model = try await coordinator.authModel(for: key)
    let rejected = model.accessToken
    let first = try await send(request, bearer: rejected)
    guard rejectedStatuses.contains(first.1.statusCode), request.httpBodyStream == nil else {
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

  /// Sends `request` once with `token` as its bearer token.
  private func send(_ request: URLRequest, bearer token: String) async throws -> (
    Data, HTTPURLResponse
  ) {
    var authorized = request
    authorized.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    let (data, response) = try await BearerClientTransfer.run(authorized, on: session)
    guard let http = response as? HTTPURLResponse else {
      throw AuthCoordinatorError(
        .nonHTTPResponse,
        "the answer to \(Self.redacted(request.url)) is not an HTTP response",
        transient: false)
    }
    return (data, http)
  }

  /// `url` without its user info, query and fragment, for a message.
  static func redacted(_ url: URL?) -> String {
    guard let url else { return "a request without a URL" }
    guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
      return "a request"
    }
    parts.user = nil
    parts.password = nil
    parts.query = nil
    parts.fragment = nil
    return parts.string ?? "a request"
  }
}

extension AuthCoordinatorError.Code {
  /// The answer to a ``BearerClient`` request was not an HTTP response (the request's URL is not
  /// an `http` or `https` URL, say). Terminal: retrying the same request gives the same answer.
  public static let nonHTTPResponse = Self(rawValue: "non_http_response")
}

extension BearerClient: CustomStringConvertible, CustomDebugStringConvertible,
  CustomReflectable
{
  /// `BearerClient(key: <account key>, rejectedStatuses: [401])`: no token, which the client
  /// never holds anyway.
  public var description: String {
    "BearerClient(key: \(key), rejectedStatuses: \(rejectedStatuses.sorted()))"
  }

  /// The same as ``description``.
  public var debugDescription: String { description }

  /// The key and the rejected statuses only, so that `dump(client)` does not walk into the
  /// coordinator and its cached models.
  public var customMirror: Mirror {
    Mirror(
      self, children: ["key": key, "rejectedStatuses": rejectedStatuses.sorted()],
      displayStyle: .struct)
  }
}
