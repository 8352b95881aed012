import Foundation

/// B3's reference: one task parked the plainest cancellable way, in `withTaskCancellationHandler`
/// around a `CheckedContinuation` that the cancellation handler resumes with
/// `CancellationError`. Its own lock settles the race between the handler and the parking (the
/// handler may run before the continuation is stored). Not a `TokenSource`: it has no model.
final class CancellableParking: Sendable {
  private enum State: Sendable {
    case idle
    case parked(CheckedContinuation<Void, any Error>)
    case cancelled
    case finished
  }

  private let state = LockedState(State.idle)
  private let parked: Counter

  /// `parked` is incremented once the continuation is stored.
  init(parked: Counter) { self.parked = parked }

  /// Returns when `resume()` is called; throws `CancellationError` when the task is cancelled.
  func park() async throws {
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let before = state.withLock { state -> State in
          let before = state
          if case .idle = state { state = .parked(continuation) }
          return before
        }
        switch before {
        case .idle: parked.increment()
        case .cancelled: continuation.resume(throwing: CancellationError())
        case .parked, .finished: continuation.resume()
        }
      }
    } onCancel: {
      take(becoming: .cancelled)?.resume(throwing: CancellationError())
    }
  }

  /// Lets the parked task return normally (no effect once it was cancelled).
  func resume() {
    take(becoming: .finished)?.resume()
  }

  private func take(becoming next: State) -> CheckedContinuation<Void, any Error>? {
    state.withLock { state in
      switch state {
      case .idle:
        state = next
        return nil
      case .parked(let continuation):
        state = .finished
        return continuation
      case .cancelled, .finished:
        return nil
      }
    }
  }
}
