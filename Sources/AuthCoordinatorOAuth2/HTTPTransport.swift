import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Where ``OAuth2Authorizer`` and ``BearerClient`` send their HTTP requests.
///
/// The default, ``URLSessionTransport``, runs them on a `URLSession`. Give a product another
/// transport to run it against an in-process server: the TestKit's `SimulatedTokenServer` and
/// `SimulatedResourceServer` are transports, which is how `authcoord simulate --service` and the
/// tests run the real products in virtual time, with no socket. Everything above the transport
/// (the grant chosen, the form, the reply's parsing and its errors, the token attached to the
/// origin only, the retry after a 401) is the same code whichever transport carries it.
///
/// A transport must keep the request's limits (``HTTPTransportRequest``): read at most
/// ``HTTPTransportRequest/maxBodySize`` bytes of a body, give up after
/// ``HTTPTransportRequest/timeout``, follow a redirect only to the request that
/// ``HTTPTransportRequest/redirect`` returns for it, and send a request that
/// ``HTTPTransportRequest/requiresFreshConnection`` on a connection no other request used.
public protocol HTTPTransport: Sendable {
  /// Sends one request and returns how it ended.
  ///
  /// - Parameter request: The request and its limits.
  /// - Returns: The response and its body, or the redirect that was refused.
  /// - Throws: A `URLError` when the request did not get through or ran out of time
  ///   (`.timedOut`), `CancellationError` when the calling task is cancelled.
  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome
}

/// One request for an ``HTTPTransport``, with the limits the product sets on it.
public struct HTTPTransportRequest: Sendable {
  /// Decides a redirect: the request to send to the new location, or `nil` to refuse it.
  public typealias RedirectDecision =
    @Sendable (_ response: HTTPURLResponse, _ next: URLRequest) -> URLRequest?

  /// The request, with every header the product set (its `Authorization` among them).
  public var urlRequest: URLRequest
  /// The most body bytes to read; a longer body ends as ``HTTPTransportOutcome/truncated(_:_:)``.
  public var maxBodySize: Int
  /// The longest the whole request may take, from its start to the last byte of the body;
  /// `nil` when the product bounds the call itself (``BearerClient/deadline``).
  public var timeout: Duration?
  /// Decides each redirect the server answers: the request to send to its location (a
  /// ``BearerClient`` keeps its token for its origin and removes it for any other), or `nil`
  /// to refuse it, which ends the request as ``HTTPTransportOutcome/redirectRefused(status:)``
  /// with nothing sent to the location.
  public var redirect: RedirectDecision
  /// Whether the request must go on a new connection of its own: never on a kept-alive
  /// connection that an earlier request used, and the connection is not kept for a later one.
  /// ``OAuth2Authorizer`` sets it on every token request. Default `false`.
  ///
  /// A kept-alive connection that the server (or a load balancer) closes just as a request is
  /// sent on it ends that request with a reset, and the client may not know whether the
  /// server read it. On Linux, swift-corelibs-foundation then sends the request again on a new
  /// connection, and sends a `POST` without its body: the server waits for the body, the
  /// client for the answer, until the request's timeout. A token request, which the server
  /// may act on by rotating a refresh token, is never sent twice behind the authorizer's back:
  /// on a connection of its own, a reset ends it at once with a `URLError`, which the
  /// authorizer reports as a transient network error for the coordinator's retries.
  /// ``URLSessionTransport`` runs such a request, on Linux, on a session of its own made from
  /// its session's configuration, with `Connection: close`.
  public var requiresFreshConnection: Bool

  /// Creates a request.
  ///
  /// - Parameters:
  ///   - urlRequest: The request.
  ///   - maxBodySize: The most body bytes to read.
  ///   - timeout: The bound of the whole request, or `nil`.
  ///   - requiresFreshConnection: Whether the request must go on a new connection of its own;
  ///     `false` by default.
  ///   - redirect: Decides each redirect; by default every redirect is refused.
  public init(
    _ urlRequest: URLRequest, maxBodySize: Int, timeout: Duration?,
    requiresFreshConnection: Bool = false,
    redirect: @escaping RedirectDecision = { _, _ in nil }
  ) {
    self.urlRequest = urlRequest
    self.maxBodySize = maxBodySize
    self.timeout = timeout
    self.requiresFreshConnection = requiresFreshConnection
    self.redirect = redirect
  }
}

/// How a request sent through an ``HTTPTransport`` ended.
public enum HTTPTransportOutcome: Sendable {
  /// The response and its whole body (empty when there is none).
  case complete(URLResponse, Data)
  /// The body was longer than ``HTTPTransportRequest/maxBodySize``: its first bytes.
  case truncated(URLResponse, Data)
  /// The server answered with a redirect of this status that
  /// ``HTTPTransportRequest/redirect`` refused; nothing was sent to its location.
  case redirectRefused(status: Int)
}
