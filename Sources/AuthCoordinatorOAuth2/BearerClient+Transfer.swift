import Foundation
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// One data task of a ``BearerClient``, cancelled when the calling task is.
///
/// It uses a completion handler rather than `URLSession.data(for:)`, whose cancellation
/// differs between Apple's Foundation and swift-corelibs-foundation: here both cancel the
/// `URLSessionDataTask` from the task's cancellation handler, and both throw
/// `CancellationError`.
final class BearerClientTransfer: Sendable {
  private struct State {
    var task: URLSessionDataTask?
    var cancelled = false
  }

  private let state = LockedState(State())

  private init() {}

  /// Runs `request` on `session`.
  ///
  /// - Parameters:
  ///   - request: The request, already authorized.
  ///   - session: The session to run it on.
  /// - Returns: The body (empty when there was none) and the response.
  /// - Throws: `CancellationError` when the calling task is cancelled; the `URLError` of a
  ///   transport failure otherwise.
  static func run(_ request: URLRequest, on session: URLSession) async throws -> (
    Data, URLResponse
  ) {
    try Task.checkCancellation()
    let transfer = BearerClientTransfer()
    let result = await withTaskCancellationHandler {
      await withCheckedContinuation { continuation in
        transfer.start(request, on: session, continuation: continuation)
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
    on session: URLSession,
    continuation: CheckedContinuation<Result<(Data, URLResponse), any Error>, Never>
  ) {
    let task = session.dataTask(with: request) { data, response, error in
      if let error {
        continuation.resume(returning: .failure(error))
      } else if let response {
        continuation.resume(returning: .success((data ?? Data(), response)))
      } else {
        continuation.resume(returning: .failure(URLError(.badServerResponse)))
      }
    }
    let cancelled = state.withLock { state -> Bool in
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
}
