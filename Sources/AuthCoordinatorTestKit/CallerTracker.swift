import Dispatch

/// Starts caller tasks and lets a test await a condition those callers drive, such as "500
/// callers are parked on the flight", without polling.
///
/// Joining or parking on a flight emits no ``/AuthCoordinator/AuthEvent`` (it is counted in
/// ``/AuthCoordinator/AuthCoordinator/statistics`` only), so an ``EventRecorder`` has nothing to
/// wake on. A tracker runs its tasks on a task executor of its own that checks the pending waits
/// again each time one of those tasks stops running: it parked, finished, or is waiting for
/// something else. A caller's arrival on a flight happens while the caller runs, so the check
/// that follows sees it.
///
/// ```swift
/// let callers = CallerTracker()
/// let opens = (0..<500).map { _ in callers.task { try await coordinator.authModel(for: key) } }
/// try await callers.waitUntil { coordinator.statistics.waitingCallers == 500 }
/// ```
///
/// Child tasks (`async let`, task groups) of a tracked task are tracked too; unstructured tasks
/// they create are not. A condition that only other tasks change (a flight finishing, a timer
/// firing) is not checked again when it changes: await the event that says so instead.
///
/// Every wait is bounded by a wall-clock watchdog (30 seconds by default) that throws
/// ``ChangeSignal/WaitError``. Where task executors are unavailable (before macOS 15, iOS 18,
/// tvOS 18, watchOS 11) the tasks run on the global executor and a wait falls back to checking
/// its condition again every 5 milliseconds of real time: slower, but it still completes.
public final class CallerTracker: Sendable {
  private let signal: ChangeSignal
  /// The ``ProgressExecutor``, where task executors exist.
  private let executor: (any Sendable)?

  /// Creates a tracker.
  ///
  /// - Parameter watchdog: How long a wait may take, in real time, before it throws
  ///   ``ChangeSignal/WaitError``. Only a safety net against a hang: keep it generous.
  public init(watchdog: Duration = .seconds(30)) {
    let signal = ChangeSignal(watchdog: watchdog)
    self.signal = signal
    if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *) {
      executor = ProgressExecutor(signal)
    } else {
      executor = nil
    }
  }

  /// Starts `body` in a new tracked task.
  ///
  /// - Parameter body: The caller's work, usually one request to the coordinator.
  /// - Returns: The task, to await or cancel.
  @discardableResult
  public func task<Success: Sendable>(
    _ body: @escaping @Sendable () async throws -> Success
  ) -> Task<Success, any Error> {
    if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *),
      let executor = executor as? ProgressExecutor
    {
      return Task(executorPreference: executor) { try await body() }
    }
    let signal = self.signal
    return Task {
      defer { signal.changed() }
      return try await body()
    }
  }

  /// Starts `body` in a new tracked task that does not throw.
  ///
  /// - Parameter body: The work, for example a task group of callers.
  /// - Returns: The task, to await or cancel.
  @discardableResult
  public func task<Success: Sendable>(
    _ body: @escaping @Sendable () async -> Success
  ) -> Task<Success, Never> {
    if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *),
      let executor = executor as? ProgressExecutor
    {
      return Task(executorPreference: executor) { await body() }
    }
    let signal = self.signal
    return Task {
      defer { signal.changed() }
      return await body()
    }
  }

  /// Runs `operation` in the current task with tracking: the current task and the child tasks
  /// it creates (a task group of callers, for example) are tracked until it returns.
  ///
  /// - Parameters:
  ///   - isolation: The caller's isolation, kept for `operation`.
  ///   - operation: The work to track.
  /// - Returns: What `operation` returns.
  /// - Throws: What `operation` throws.
  public func withTracking<Result, Failure: Error>(
    isolation: isolated (any Actor)? = #isolation,
    _ operation: () async throws(Failure) -> Result
  ) async throws(Failure) -> Result {
    if #available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *),
      let executor = executor as? ProgressExecutor
    {
      return try await withTaskExecutorPreference(
        executor, isolation: isolation, operation: operation)
    }
    return try await operation()
  }

  /// Waits until `condition` holds, checking it now and each time a tracked task stops running.
  ///
  /// - Parameters:
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  ///   - condition: What to wait for, such as a statistics counter the tracked callers move.
  ///     Called with a lock held: it must not call the tracker.
  /// - Throws: ``ChangeSignal/WaitError`` when the watchdog expires first; `CancellationError`
  ///   when the waiting task is cancelled.
  public func waitUntil(
    fileID: String = #fileID, line: Int = #line,
    _ condition: @escaping @Sendable () -> Bool
  ) async throws {
    guard executor == nil else {
      return try await signal.waitUntil(fileID: fileID, line: line, condition)
    }
    // No task executor: nothing tells the tracker that a caller parked, so re-check.
    let pacer = Task {
      while !Task.isCancelled {
        try? await Task.sleep(for: .milliseconds(5))
        signal.changed()
      }
    }
    defer { pacer.cancel() }
    try await signal.waitUntil(fileID: fileID, line: line, condition)
  }
}

/// Runs jobs on the global dispatch queue and signals after each one: the task that ran has
/// stopped running (suspended or finished), and whatever it changed is visible.
@available(macOS 15.0, iOS 18.0, tvOS 18.0, watchOS 11.0, visionOS 2.0, *)
private final class ProgressExecutor: TaskExecutor {
  private let signal: ChangeSignal

  init(_ signal: ChangeSignal) { self.signal = signal }

  func enqueue(_ job: consuming ExecutorJob) {
    let job = UnownedJob(job)
    DispatchQueue.global().async { [self] in
      job.runSynchronously(on: asUnownedTaskExecutor())
      signal.changed()
    }
  }
}
