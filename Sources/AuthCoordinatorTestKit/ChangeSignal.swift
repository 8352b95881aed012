import SyncPrimitives

/// Lets a test await a condition on state that a test double changes, instead of polling it.
///
/// The code that changes the state (a fake store, a ledger, a fake SDK) calls ``changed()``
/// after each change; a test awaits ``waitUntil(within:fileID:line:_:)``, which checks its condition
/// at once and again on every ``changed()``. Nothing spins and nothing sleeps to decide.
///
/// ```swift
/// final class FakeStore: TokenStore {
///   let changes = ChangeSignal()
///   func save(_ model: AuthModel, for key: AccountKey) async throws {
///     saved.withLock { $0[key] = model }
///     changes.changed()                       // after the change
///   }
/// }
///
/// try await store.changes.waitUntil { store.saved.withLock { $0[key] != nil } }
/// ```
///
/// Every wait is bounded by a wall-clock watchdog (30 seconds by default) that throws
/// ``WaitError``, so a change that never comes fails the test instead of stalling the run.
public final class ChangeSignal: Sendable {
  /// Why a wait ended without its condition.
  public struct WaitError: Error, CustomStringConvertible {
    /// What the wait was for and where it was called.
    public let description: String
  }

  private struct Waiter {
    let id: UInt64
    let condition: @Sendable () -> Bool
    let continuation: CheckedContinuation<Void, any Error>
  }

  private struct State {
    var waiters: [Waiter] = []
    var nextID: UInt64 = 0
  }

  private let state = LockedState(State())
  private let watchdog: Duration

  /// Creates a signal.
  ///
  /// - Parameter watchdog: How long a wait may take, in real time, before it throws
  ///   ``WaitError``. Only a safety net against a hang: keep it generous.
  public init(watchdog: Duration = .seconds(30)) { self.watchdog = watchdog }

  /// Says that state a condition may read has changed: every pending wait checks its condition
  /// again. Cheap when nobody waits. Call it after the change, not before.
  public func changed() {
    let ready = state.withLock { state -> [CheckedContinuation<Void, any Error>] in
      guard !state.waiters.isEmpty else { return [] }
      var ready: [CheckedContinuation<Void, any Error>] = []
      state.waiters.removeAll { waiter in
        guard waiter.condition() else { return false }
        ready.append(waiter.continuation)
        return true
      }
      return ready
    }
    for continuation in ready { continuation.resume() }
  }

  /// Waits until `condition` holds, checking it now and after each ``changed()``.
  ///
  /// - Parameters:
  ///   - limit: How long this wait may take, in real time, before it throws ``WaitError``;
  ///     `nil` for the signal's watchdog. A bound that fails the test, not a wait for work to
  ///     happen.
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  ///   - condition: What to wait for. Called with the signal's lock held: it must not call the
  ///     signal, and must become true only through changes followed by ``changed()``.
  /// - Throws: ``WaitError`` when the watchdog expires first; `CancellationError` when the
  ///   waiting task is cancelled.
  public func waitUntil(
    within limit: Duration? = nil, fileID: String = #fileID, line: Int = #line,
    _ condition: @escaping @Sendable () -> Bool
  ) async throws {
    let id = state.withLock { state -> UInt64 in
      defer { state.nextID += 1 }
      return state.nextID
    }
    let watchdog = limit ?? self.watchdog
    let timer = Task { [weak self] in
      do { try await Task.sleep(for: watchdog) } catch { return }
      self?.fail(id, WaitError(description: "\(fileID):\(line): not true within \(watchdog)"))
    }
    defer { timer.cancel() }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        let holds = state.withLock { state -> Bool in
          if condition() { return true }
          state.waiters.append(Waiter(id: id, condition: condition, continuation: continuation))
          return false
        }
        if holds { continuation.resume() }
        if Task.isCancelled { fail(id, CancellationError()) }
      }
    } onCancel: {
      fail(id, CancellationError())
    }
  }

  /// Fails wait `id` with `error` if it is still waiting.
  private func fail(_ id: UInt64, _ error: any Error) {
    let continuation = state.withLock { state -> CheckedContinuation<Void, any Error>? in
      guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
      return state.waiters.remove(at: index).continuation
    }
    continuation?.resume(throwing: error)
  }
}
