import Foundation
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Runs data tasks on one long-lived session, each with a delegate of its own
/// (``BoundedDataTask``), so that the tasks of one client share the session's connections.
///
/// On Apple platforms the delegate is a per-task delegate (`URLSessionTask.delegate`) on the
/// given session, whose own delegate still sees every other event (server trust, metrics). On
/// Linux, where swift-corelibs-foundation ignores per-task delegates of plain data tasks, the
/// tasks run on one session this object makes from the given session's configuration, whose
/// delegate hands each event to its task's delegate; the given session's delegate is not
/// consulted there.
package final class SessionRouter: Sendable {
  #if canImport(Darwin)
    private let session: URLSession

    package init(session: URLSession) {
      self.session = session
    }

    func makeTask(_ request: URLRequest, for delegate: BoundedDataTask) -> URLSessionDataTask {
      let task = session.dataTask(with: request)
      task.delegate = delegate
      return task
    }
  #else
    private let router: Router
    private let session: URLSession

    package init(session given: URLSession) {
      let router = Router()
      self.router = router
      session = URLSession(
        configuration: given.configuration, delegate: router, delegateQueue: nil)
    }

    deinit {
      session.finishTasksAndInvalidate()
    }

    func makeTask(_ request: URLRequest, for delegate: BoundedDataTask) -> URLSessionDataTask {
      let task = session.dataTask(with: request)
      router.register(delegate, for: task)
      return task
    }

    /// The session delegate: finds each event's task delegate by task identifier.
    private final class Router: NSObject, URLSessionDataDelegate, Sendable {
      private let delegates = LockedState([Int: BoundedDataTask]())

      func register(_ delegate: BoundedDataTask, for task: URLSessionTask) {
        delegates.withLock { $0[task.taskIdentifier] = delegate }
      }

      private func delegate(for task: URLSessionTask, removing: Bool = false)
        -> BoundedDataTask?
      {
        delegates.withLock {
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
        guard let delegate = delegate(for: task) else {
          completionHandler(nil)
          return
        }
        delegate.urlSession(
          session, task: task, willPerformHTTPRedirection: response, newRequest: request,
          completionHandler: completionHandler)
      }

      func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didReceive challenge: URLAuthenticationChallenge,
        completionHandler: @escaping (URLSession.AuthChallengeDisposition, URLCredential?) -> Void
      ) {
        guard let delegate = delegate(for: task) else {
          completionHandler(AuthenticationChallenges.disposition(for: challenge), nil)
          return
        }
        delegate.urlSession(
          session, task: task, didReceive: challenge, completionHandler: completionHandler)
      }

      func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data
      ) {
        delegate(for: dataTask)?.urlSession(session, dataTask: dataTask, didReceive: data)
      }

      func urlSession(
        _ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?
      ) {
        delegate(for: task, removing: true)?.urlSession(
          session, task: task, didCompleteWithError: error)
      }
    }
  #endif
}
