import Foundation
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Runs one data task, keeping at most `limit` bytes of the body, bounding the whole task by a
/// timeout, deciding each redirect, and cancelling the task when the caller's Task is cancelled.
///
/// It is the task's delegate rather than a caller of `data(for:)`, which buffers the whole
/// body, so a huge reply costs at most `limit` bytes. It runs either on a ``SessionRouter`` (one
/// long-lived session per client, whose tasks each have their own delegate) or, for a one-off
/// request, on any `URLSession`: there, on Apple platforms, it is a per-task delegate on the
/// given session, whose own delegate still sees every other event (authentication challenges,
/// metrics); on Linux, where swift-corelibs-foundation ignores per-task delegates of plain data
/// tasks, the task runs on a one-off session made from the given session's configuration.
///
/// Redirects are decided by the caller's `redirect` closure in this object's
/// `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)`, which both
/// platforms call on the task's delegate (swift-corelibs-foundation calls it on the session
/// delegate, which the router forwards). A refused redirect ends the task at once as
/// `.redirectRefused`: nothing is sent to the new location. A followed one goes to the request
/// the closure returned (a bearer client sets or removes its token there).
///
/// On Linux this object also answers the session's authentication challenges (see
/// ``AuthenticationChallenges``): an HTTP authentication challenge is declined, and the 401 that
/// raised it, which has arrived by then, is the outcome. Without that, swift-corelibs-foundation
/// stalls on a 401 whose `WWW-Authenticate` holds `Basic realm="…"` until the timeout, and a
/// refused client reads as a network failure. On Apple platforms the session's own delegate, or
/// the default handling, answers challenges, and the 401 comes back as the response.
package final class BoundedDataTask: NSObject, URLSessionDataDelegate, @unchecked Sendable {
  /// How the task ended.
  package enum Outcome {
    /// The whole body arrived.
    case complete(URLResponse?, Data)
    /// The body was longer than the limit; `Data` holds its first bytes.
    case tooLarge(URLResponse?, Data)
    /// The transport failed with this `URLError` code (the error itself is dropped: it carries
    /// the request URL, which may hold the auth code).
    case failed(URLError.Code)
    /// The server answered with a redirect (this status code) that the caller refused; the
    /// redirect was not followed.
    case redirectRefused(Int)
  }

  /// Decides a redirect: the request to send to the new location, or `nil` to refuse it.
  package typealias RedirectDecision = @Sendable (HTTPURLResponse, URLRequest) -> URLRequest?

  private struct State {
    var continuation: CheckedContinuation<Outcome, Never>?
    var task: URLSessionDataTask?
    var response: URLResponse?
    var body = Data()
    var tooLarge = false
    var cancelled = false
    var timedOut = false
    var declinedChallenge = false
    var timer: DispatchWorkItem?
    var finished = false
  }

  private let limit: Int
  private let timeout: TimeInterval?
  private let redirect: RedirectDecision
  private let state = LockedState(State())

  private init(limit: Int, timeout: TimeInterval?, redirect: @escaping RedirectDecision) {
    self.limit = limit
    self.timeout = timeout
    self.redirect = redirect
  }

  /// Where a task runs.
  private enum Venue {
    case session(URLSession)
    case router(SessionRouter)
  }

  /// Runs `request` on `session`, as a one-off request (on Linux, on a session of its own).
  ///
  /// - Parameters:
  ///   - request: The request.
  ///   - session: The session to run it on.
  ///   - limit: The most body bytes kept.
  ///   - timeout: The most time the whole task may take, from start to last byte; when it
  ///     passes, the task is cancelled and ends as `.failed(.timedOut)`. (It is enforced here
  ///     because `URLRequest.timeoutInterval` is an idle timeout on Apple platforms and is
  ///     truncated to whole seconds by swift-corelibs-foundation.)
  ///   - redirects: Which redirects may be followed; a refused one ends the task as
  ///     `.redirectRefused`.
  /// - Returns: How the task ended.
  /// - Throws: `CancellationError` when the calling Task is cancelled.
  package static func run(
    _ request: URLRequest,
    on session: URLSession,
    limit: Int,
    timeout: TimeInterval,
    redirects: RedirectPolicy
  ) async throws -> Outcome {
    try await run(
      request, on: session, limit: limit, timeout: timeout,
      redirect: { _, next in redirects.allowsRedirect(to: next.url) ? next : nil })
  }

  /// Runs `request` on `session`, as a one-off request (on Linux, on a session of its own, so
  /// on a connection of its own: none that an earlier task used, none that a later task
  /// reuses).
  ///
  /// - Parameters:
  ///   - request: The request.
  ///   - session: The session to run it on (on Linux, the session whose configuration it uses).
  ///   - limit: The most body bytes kept.
  ///   - timeout: The most time the whole task may take (see the other `run`); `nil` for no
  ///     bound of its own.
  ///   - redirect: Decides each redirect.
  /// - Returns: How the task ended.
  /// - Throws: `CancellationError` when the calling Task is cancelled.
  package static func run(
    _ request: URLRequest,
    on session: URLSession,
    limit: Int,
    timeout: TimeInterval?,
    redirect: @escaping RedirectDecision
  ) async throws -> Outcome {
    try await run(
      request, at: .session(session), limit: limit, timeout: timeout, redirect: redirect)
  }

  /// Runs `request` on `router`'s session.
  ///
  /// - Parameters:
  ///   - request: The request.
  ///   - router: The client's session.
  ///   - limit: The most body bytes kept.
  ///   - timeout: The most time the whole task may take (see the other `run`); `nil` for no
  ///     bound of its own.
  ///   - redirect: Decides each redirect.
  /// - Returns: How the task ended.
  /// - Throws: `CancellationError` when the calling Task is cancelled.
  package static func run(
    _ request: URLRequest,
    via router: SessionRouter,
    limit: Int,
    timeout: TimeInterval?,
    redirect: @escaping RedirectDecision
  ) async throws -> Outcome {
    try await run(request, at: .router(router), limit: limit, timeout: timeout, redirect: redirect)
  }

  private static func run(
    _ request: URLRequest, at venue: Venue, limit: Int, timeout: TimeInterval?,
    redirect: @escaping RedirectDecision
  ) async throws -> Outcome {
    let runner = BoundedDataTask(limit: limit, timeout: timeout, redirect: redirect)
    let outcome = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        runner.start(request, at: venue, continuation: continuation)
      }
    } onCancel: {
      runner.cancel()
    }
    if case .failed(.cancelled) = outcome { throw CancellationError() }
    try Task.checkCancellation()
    return outcome
  }

  private func start(
    _ request: URLRequest,
    at venue: Venue,
    continuation: CheckedContinuation<Outcome, Never>
  ) {
    let task: URLSessionDataTask
    switch venue {
    case .router(let router):
      task = router.makeTask(request, for: self)
    case .session(let session):
      #if canImport(Darwin)
        task = session.dataTask(with: request)
        task.delegate = self
      #else
        // swift-corelibs-foundation does not call a per-task delegate for a plain data task, so
        // the task runs on a one-off session with this object as its delegate, made from the
        // given session's configuration and invalidated as soon as its one task ends.
        let oneOff = URLSession(
          configuration: session.configuration, delegate: self, delegateQueue: nil)
        task = oneOff.dataTask(with: request)
        oneOff.finishTasksAndInvalidate()
      #endif
    }
    let cancelled = state.withLock { state -> Bool in
      state.continuation = continuation
      state.task = task
      return state.cancelled
    }
    if cancelled {
      finish(.failed(.cancelled))
      task.cancel()  // completes the never-started task, so a one-off session can invalidate
      return
    }
    if let timeout {
      let timer = DispatchWorkItem { [weak self] in self?.timeOut() }
      let armed = state.withLock { state -> Bool in
        guard !state.finished else { return false }
        state.timer = timer
        return true
      }
      if armed {
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: timer)
      }
    }
    task.resume()
  }

  private func timeOut() {
    let task = state.withLock { state -> URLSessionDataTask? in
      guard !state.finished else { return nil }
      state.timedOut = true
      return state.task
    }
    task?.cancel()
  }

  private func cancel() {
    let task = state.withLock { state -> URLSessionDataTask? in
      state.cancelled = true
      return state.task
    }
    task?.cancel()
  }

  /// Resumes the caller exactly once.
  private func finish(_ outcome: Outcome) {
    let continuation = state.withLock { state -> CheckedContinuation<Outcome, Never>? in
      guard !state.finished else { return nil }
      state.finished = true
      defer {
        state.continuation = nil
        state.task = nil
        state.timer?.cancel()
        state.timer = nil
      }
      return state.continuation
    }
    continuation?.resume(returning: outcome)
  }

  // MARK: URLSessionDataDelegate

  package func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    willPerformHTTPRedirection response: HTTPURLResponse,
    newRequest request: URLRequest,
    completionHandler: @escaping (URLRequest?) -> Void
  ) {
    if let next = redirect(response, request) {
      completionHandler(next)
      return
    }
    // Finished first, so the outcome is the refusal whatever the session does next. Then nil:
    // do not follow (the task would complete with the 3xx reply; it is cancelled instead, so its
    // body is never read).
    finish(.redirectRefused(response.statusCode))
    completionHandler(nil)
    task.cancel()
  }

  #if canImport(FoundationNetworking)
    package func urlSession(
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

  package func urlSession(
    _ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data
  ) {
    // The declared length is checked with the first bytes (rather than in a `didReceive
    // response` override, whose signature differs between Darwin and corelibs).
    let response = dataTask.response
    let declared = response?.expectedContentLength ?? -1
    let overflow = state.withLock { state -> (URLResponse?, Data)? in
      guard !state.tooLarge else { return nil }
      state.response = state.response ?? response
      if declared > Int64(limit) {
        state.tooLarge = true
        return (state.response, state.body)
      }
      let room = limit - state.body.count
      if data.count <= room {
        state.body.append(data)
        return nil
      }
      state.body.append(data.prefix(room))
      state.tooLarge = true
      return (state.response, state.body)
    }
    if let (response, body) = overflow {
      finish(.tooLarge(response, body))
      dataTask.cancel()
    }
  }

  package func urlSession(
    _ session: URLSession,
    task: URLSessionTask,
    didCompleteWithError error: (any Error)?
  ) {
    let (response, body, tooLarge, cancelled, timedOut, declined) = state.withLock {
      (
        $0.response ?? task.response, $0.body, $0.tooLarge, $0.cancelled, $0.timedOut,
        $0.declinedChallenge
      )
    }
    if tooLarge {
      finish(.tooLarge(response, body))
    } else if cancelled {
      finish(.failed(.cancelled))
    } else if timedOut {
      finish(.failed(.timedOut))
    } else if declined, (error as? URLError)?.code == .cancelled, let response {
      // The declined challenge cancelled the task after its 401 (head and body) arrived: that
      // 401 is the endpoint's answer.
      finish(.complete(response, body))
    } else if let error {
      finish(.failed((error as? URLError)?.code ?? .unknown))
    } else {
      finish(.complete(response, body))
    }
  }
}
