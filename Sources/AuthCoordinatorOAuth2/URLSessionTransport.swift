import Foundation
import HTTPSupport

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The ``HTTPTransport`` on `URLSession`: what ``OAuth2Authorizer`` and ``BearerClient`` use
/// unless given another.
///
/// Every task has a delegate of its own that reads at most the request's
/// ``HTTPTransportRequest/maxBodySize`` bytes, bounds the whole task by its
/// ``HTTPTransportRequest/timeout`` (`URLRequest.timeoutInterval` is an idle timeout on Apple
/// platforms and whole seconds on Linux, so the bound is enforced here), asks the request's
/// ``HTTPTransportRequest/redirect`` about every redirect, and cancels the task when the calling
/// task is cancelled.
///
/// On Apple platforms the delegate is a per-task delegate on the given session, whose own
/// delegate still sees every other event (server trust, metrics). On Linux, where
/// swift-corelibs-foundation ignores per-task delegates, the tasks run on one session this
/// transport makes from the given session's configuration; the given session's delegate is not
/// consulted there, and an HTTP authentication challenge is declined, so that the 401 that
/// raised it is the answer (swift-corelibs-foundation would otherwise stall on a
/// `WWW-Authenticate: Basic` 401 until the timeout). A request that
/// ``HTTPTransportRequest/requiresFreshConnection`` (every token request) runs there on a
/// one-off session of its own, on a new connection, with `Connection: close`.
public struct URLSessionTransport: HTTPTransport {
  /// The session the tasks run on (on Linux, the session whose configuration they use).
  public let session: URLSession
  private let router: SessionRouter

  /// Creates a transport on `session`.
  ///
  /// - Parameter session: The session; `URLSession.shared` by default.
  public init(session: URLSession = .shared) {
    self.session = session
    router = SessionRouter(session: session)
  }

  /// Runs one data task for `request` within its limits.
  ///
  /// - Parameter request: The request and its limits.
  /// - Returns: The response and its body, a truncated body, or the refused redirect.
  /// - Throws: A `URLError` (without the request's URL, which may hold a secret) when the task
  ///   failed or ran out of time; `CancellationError` when the calling task is cancelled.
  public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let outcome: BoundedDataTask.Outcome
    #if canImport(FoundationNetworking)
      if request.requiresFreshConnection {
        // A session of its own has a connection pool of its own (libcurl keeps one per
        // session), so the request never goes on a connection another request left open, and
        // libcurl never replays it (it does so only on a reused connection, and without the
        // body of a POST). `Connection: close` has the server close it after its answer.
        var urlRequest = request.urlRequest
        urlRequest.setValue("close", forHTTPHeaderField: "Connection")
        outcome = try await BoundedDataTask.run(
          urlRequest, on: session, limit: request.maxBodySize,
          timeout: request.timeout?.seconds, redirect: request.redirect)
      } else {
        outcome = try await BoundedDataTask.run(
          request.urlRequest, via: router, limit: request.maxBodySize,
          timeout: request.timeout?.seconds, redirect: request.redirect)
      }
    #else
      // URLSession on Apple platforms sends a request again on a new connection, body
      // included, when a reused one turns out to be closed before it was sent.
      outcome = try await BoundedDataTask.run(
        request.urlRequest, via: router, limit: request.maxBodySize,
        timeout: request.timeout?.seconds, redirect: request.redirect)
    #endif
    switch outcome {
    case .complete(let response?, let body): return .complete(response, body)
    case .tooLarge(let response?, let body): return .truncated(response, body)
    case .complete(nil, _), .tooLarge(nil, _): throw URLError(.badServerResponse)
    case .failed(let code): throw URLError(code)
    case .redirectRefused(let status): return .redirectRefused(status: status)
    }
  }
}
