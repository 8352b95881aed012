import Foundation
import HTTPSupport
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Where a ``BearerClient``'s requests run, and the delegate that keeps its token at its origin.
///
/// Every task has a ``BearerClientTransfer`` as its delegate, which decides each redirect (the
/// token is set again for the client's origin and removed for any other: swift-corelibs-foundation
/// would copy it), answers HTTP authentication challenges (see `AuthenticationChallenges`) and
/// collects the answer. On Apple platforms it is a per-task delegate on the client's session,
/// whose own delegate still sees every other event (server trust, metrics). On Linux, where
/// swift-corelibs-foundation ignores per-task delegates, the tasks run on one session this
/// object makes from the given session's configuration, with a delegate that hands each event to
/// its task's transfer; the given session's delegate is not consulted there.
final class BearerClientTransport: Sendable {
  #if canImport(Darwin)
    private let session: URLSession

    init(session: URLSession) {
      self.session = session
    }

    func makeTask(_ request: URLRequest, for transfer: BearerClientTransfer)
      -> URLSessionDataTask
    {
      let task = session.dataTask(with: request)
      task.delegate = transfer
      return task
    }
  #else
    private let router: Router
    private let session: URLSession

    init(session given: URLSession) {
      let router = Router()
      self.router = router
      session = URLSession(
        configuration: given.configuration, delegate: router, delegateQueue: nil)
    }

    deinit {
      session.finishTasksAndInvalidate()
    }

    func makeTask(_ request: URLRequest, for transfer: BearerClientTransfer)
      -> URLSessionDataTask
    {
      let task = session.dataTask(with: request)
      router.register(transfer, for: task)
      return task
    }

    /// The session delegate: finds each event's transfer by task identifier.
    private final class Router: NSObject, URLSessionDataDelegate, Sendable {
      private let transfers = LockedState([Int: BearerClientTransfer]())

      func register(_ transfer: BearerClientTransfer, for task: URLSessionTask) {
        transfers.withLock { $0[task.taskIdentifier] = transfer }
      }

      private func transfer(for task: URLSessionTask, removing: Bool = false)
        -> BearerClientTransfer?
      {
        transfers.withLock {
          removing ? $0.removeValue(forKey: task.taskIdentifier) : $0[task.taskIdentifier]
        }
      }

      func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest,
        completionHandler: @escaping (URLRequest?) -> Void
      ) {
        guard let transfer = transfer(for: task) else {
          completionHandler(nil)
          return
        }
        transfer.urlSession(
          session, task: task, willPerformHTTPRedirection: response, newRequest: request,
          completionHandler: completionHandler)
      }

      func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
      ) {
        guard let transfer = transfer(for: task) else {
          completionHandler(AuthenticationChallenges.disposition(for: challenge), nil)
          return
        }
        transfer.urlSession(
          session, task: task, didReceive: challenge, completionHandler: completionHandler)
      }

      func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data
      ) {
        transfer(for: dataTask)?.urlSession(session, dataTask: dataTask, didReceive: data)
      }

      func urlSession(
        _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
      ) {
        transfer(for: task, removing: true)?.urlSession(
          session, task: task, didCompleteWithError: error)
      }
    }
  #endif
}

/// One data task of a ``BearerClient``, cancelled when the calling task is.
///
/// Both platforms cancel the `URLSessionDataTask` from the calling task's cancellation handler
/// and throw `CancellationError`.
final class BearerClientTransfer: NSObject, URLSessionDataDelegate, Sendable {
  private struct State {
    var continuation: CheckedContinuation<Result<(Data, URLResponse), any Error>, Never>?
    var task: URLSessionDataTask?
    var body = Data()
    var cancelled = false
    var declinedChallenge = false
  }

  private let state = LockedState(State())
  /// The client's origin: redirects to it carry `authorization`, any other none.
  private let origin: URL
  /// The `Authorization` header value sent to the origin.
  private let authorization: String

  private init(origin: URL, authorization: String) {
    self.origin = origin
    self.authorization = authorization
  }

  /// Runs `request` on `transport`.
  ///
  /// - Parameters:
  ///   - request: The request, already authorized.
  ///   - transport: Where it runs.
  ///   - origin: The client's origin; a redirect elsewhere loses the `Authorization` header.
  ///   - authorization: The header's value, set again on a redirect to `origin`.
  /// - Returns: The body (empty when there was none) and the response.
  /// - Throws: `CancellationError` when the calling task is cancelled; the `URLError` of a
  ///   transport failure otherwise.
  static func run(
    _ request: URLRequest, on transport: BearerClientTransport, origin: URL,
    authorization: String
  ) async throws -> (Data, URLResponse) {
    try Task.checkCancellation()
    let transfer = BearerClientTransfer(origin: origin, authorization: authorization)
    let result = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        transfer.start(request, on: transport, continuation: continuation)
      }
    } onCancel: {
      transfer.cancel()
    }
    switch result {
    case .success(let answer):
      return answer
    case .failure(let error):
      if Task.isCancelled || transfer.wasCancelled { throw CancellationError() }
      throw error
    }
  }

  private var wasCancelled: Bool { state.withLock { $0.cancelled } }

  private func start(
    _ request: URLRequest,
    on transport: BearerClientTransport,
    continuation: CheckedContinuation<Result<(Data, URLResponse), any Error>, Never>
  ) {
    let task = transport.makeTask(request, for: self)
    let cancelled = state.withLock { state -> Bool in
      state.continuation = continuation
      state.task = task
      return state.cancelled
    }
    // Cancelled before the task existed: it completes at once with `URLError.cancelled`.
    if cancelled { task.cancel() }
    task.resume()
  }

  private func cancel() {
    let task = state.withLock { state -> URLSessionDataTask? in
      state.cancelled = true
      return state.task
    }
    task?.cancel()
  }

  private func finish(_ result: Result<(Data, URLResponse), any Error>) {
    let continuation = state.withLock { state in
      defer {
        state.continuation = nil
        state.task = nil
      }
      return state.continuation
    }
    continuation?.resume(returning: result)
  }

  // MARK: URLSessionDataDelegate

  func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    willPerformHTTPRedirection response: HTTPURLResponse,
    newRequest request: URLRequest,
    completionHandler: @escaping (URLRequest?) -> Void
  ) {
    var next = request
    if let target = request.url, RedirectPolicy.sameOrigin(origin, target) {
      next.setValue(authorization, forHTTPHeaderField: "Authorization")
    } else {
      // Another origin never sees the token (swift-corelibs-foundation copies the header).
      next.setValue(nil, forHTTPHeaderField: "Authorization")
    }
    completionHandler(next)
  }

  #if canImport(FoundationNetworking)
    // Linux only: on Apple platforms the session's own delegate, or the default handling,
    // answers challenges, and a 401 comes back as the response (no stall to work around).
    func urlSession(
      _ session: URLSession,
      task: URLSessionTask,
      didReceive challenge: URLAuthenticationChallenge,
      completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
    ) {
      let disposition = AuthenticationChallenges.disposition(for: challenge)
      if disposition == .cancelAuthenticationChallenge {
        state.withLock { $0.declinedChallenge = true }
      }
      completionHandler(disposition, nil)
    }
  #endif

  func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
    state.withLock { $0.body.append(data) }
  }

  func urlSession(
    _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
  ) {
    let (body, cancelled, declined) = state.withLock {
      ($0.body, $0.cancelled, $0.declinedChallenge)
    }
    let response = task.response
    if cancelled {
      finish(.failure(CancellationError()))
    } else if let error {
      // A declined challenge cancels the task after its 401 arrived: that 401 is the answer.
      if declined, (error as? URLError)?.code == .cancelled, let response {
        finish(.success((body, response)))
      } else {
        finish(.failure(error))
      }
    } else if let response {
      finish(.success((body, response)))
    } else {
      finish(.failure(URLError(.badServerResponse)))
    }
  }
}
