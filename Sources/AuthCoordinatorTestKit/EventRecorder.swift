import AuthCoordinator
import SyncPrimitives

/// Records a coordinator's ``/AuthCoordinator/AuthEvent``s so that a test awaits the event that
/// says something happened instead of polling for it.
///
/// Make the recorder *before* the action: ``/AuthCoordinator/AuthCoordinator/events`` only
/// delivers events emitted after it was subscribed, and the recorder subscribes when it is
/// created. Every wait looks at everything recorded since then, so an event that arrived before
/// the wait began still counts.
///
/// ```swift
/// let events = EventRecorder(coordinator)       // 1. subscribe
/// staleCall.succeed(with: model)               // 2. act
/// try await events.first { event in             // 3. await the event
///   if case .lateResultDiscarded = event { return true }
///   return false
/// }
/// ```
///
/// A wait never sleeps to decide anything. Its only bound is a wall-clock watchdog (30 seconds
/// by default) that turns a hang into a thrown ``WaitError`` naming what was awaited and the
/// events seen, so a missing event fails the test instead of stalling the run.
public final class EventRecorder: Sendable {
  /// Why a wait ended without its event.
  public struct WaitError: Error, CustomStringConvertible {
    /// What the wait was for and where it was called, then the events recorded so far.
    public let description: String
  }

  private struct Waiter {
    let id: UInt64
    /// Returns the resumption to run when the recorded events satisfy the wait.
    let check: @Sendable ([AuthEvent]) -> (@Sendable () -> Void)?
    let fail: @Sendable (any Error) -> Void
  }

  private struct State {
    var events: [AuthEvent] = []
    var waiters: [Waiter] = []
    var nextID: UInt64 = 0
    var finished = false
  }

  private let state = LockedState(State())
  private let watchdog: Duration
  private let drain = LockedState<Task<Void, Never>?>(nil)

  /// Subscribes to `coordinator`'s events and records them from now on.
  ///
  /// - Parameters:
  ///   - coordinator: The coordinator to watch.
  ///   - watchdog: How long a wait may take, in real time, before it throws ``WaitError``.
  ///     Only a safety net against a hang: keep it generous.
  public init(_ coordinator: AuthCoordinator, watchdog: Duration = .seconds(30)) {
    self.watchdog = watchdog
    let stream = coordinator.events  // subscribes now, before the caller acts
    let task = Task { [weak self] in
      for await event in stream {
        guard let self else { return }
        self.receive(event)
      }
      self?.streamEnded()
    }
    drain.withLock { $0 = task }
  }

  deinit { drain.withLock { $0?.cancel() } }

  /// The events recorded so far, oldest first.
  public var events: [AuthEvent] { state.withLock { $0.events } }

  /// Returns the first recorded event that matches `predicate`, waiting for it if needed.
  ///
  /// - Parameters:
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  ///   - predicate: Whether an event is the one awaited.
  /// - Returns: The matching event.
  /// - Throws: ``WaitError`` when the watchdog expires or the stream ends first;
  ///   `CancellationError` when the waiting task is cancelled.
  @discardableResult
  public func first(
    fileID: String = #fileID, line: Int = #line,
    where predicate: @escaping @Sendable (AuthEvent) -> Bool
  ) async throws -> AuthEvent {
    try await wait("an event matching the predicate", at: "\(fileID):\(line)") { events in
      events.first(where: predicate)
    }
  }

  /// Waits until `condition` holds, checking it now and again after each recorded event.
  ///
  /// Use it for state the events drive, such as ``/AuthCoordinator/AuthCoordinator/statistics``.
  /// The condition is re-checked only when an event arrives, so it must become true at or
  /// before an event: a counter that changes after the last event of the action is missed (the
  /// watchdog then fails the wait). Prefer ``first(fileID:line:where:)`` when an event itself
  /// says what happened.
  ///
  /// - Parameters:
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  ///   - condition: What to wait for. Called with the recorder's lock held: it must not call
  ///     the recorder.
  /// - Throws: ``WaitError`` when the watchdog expires or the stream ends first;
  ///   `CancellationError` when the waiting task is cancelled.
  public func waitUntil(
    fileID: String = #fileID, line: Int = #line,
    _ condition: @escaping @Sendable () -> Bool
  ) async throws {
    try await wait("the condition", at: "\(fileID):\(line)") { _ in condition() ? () : nil }
  }

  private func wait<Value: Sendable>(
    _ what: String, at location: String,
    _ satisfied: @escaping @Sendable ([AuthEvent]) -> Value?
  ) async throws -> Value {
    let id = state.withLock { state -> UInt64 in
      defer { state.nextID += 1 }
      return state.nextID
    }
    let watchdog = self.watchdog
    let timer = Task { [weak self] in
      do { try await Task.sleep(for: watchdog) } catch { return }
      self?.fail(id) { events in
        WaitError(
          description: "\(location): \(what) did not happen within \(watchdog); "
            + "\(events.count) events, the last \(min(events.count, 20)): \(events.suffix(20))"
        )
      }
    }
    defer { timer.cancel() }
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Value, any Error>) in
        let waiter = Waiter(
          id: id,
          check: { events in
            guard let value = satisfied(events) else { return nil }
            return { continuation.resume(returning: value) }
          },
          fail: { continuation.resume(throwing: $0) })
        let now = state.withLock { state -> (@Sendable () -> Void)? in
          if let resume = waiter.check(state.events) { return resume }
          if state.finished {
            let error = WaitError(
              description: "\(location): the event stream ended before \(what); "
                + "events: \(state.events)")
            return { waiter.fail(error) }
          }
          state.waiters.append(waiter)
          return nil
        }
        now?()
        if Task.isCancelled { fail(id) { _ in CancellationError() } }
      }
    } onCancel: {
      fail(id) { _ in CancellationError() }
    }
  }

  private func receive(_ event: AuthEvent) {
    let ready = state.withLock { state -> [@Sendable () -> Void] in
      state.events.append(event)
      var ready: [@Sendable () -> Void] = []
      let events = state.events
      state.waiters.removeAll { waiter in
        guard let resume = waiter.check(events) else { return false }
        ready.append(resume)
        return true
      }
      return ready
    }
    for resume in ready { resume() }
  }

  /// Fails waiter `id` if it is still waiting.
  private func fail(_ id: UInt64, with error: @Sendable ([AuthEvent]) -> any Error) {
    let failed = state.withLock { state -> (@Sendable () -> Void)? in
      guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
      let waiter = state.waiters.remove(at: index)
      let error = error(state.events)
      return { waiter.fail(error) }
    }
    failed?()
  }

  private func streamEnded() {
    let waiters = state.withLock { state -> ([Waiter], [AuthEvent]) in
      state.finished = true
      defer { state.waiters = [] }
      return (state.waiters, state.events)
    }
    for waiter in waiters.0 {
      waiter.fail(WaitError(description: "the event stream ended; events: \(waiters.1)"))
    }
  }
}
