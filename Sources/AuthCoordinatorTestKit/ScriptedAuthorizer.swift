import AuthCoordinator
import SyncPrimitives

/// An ``/AuthCoordinator/Authorizer`` whose every call waits for the test to say what happens next.
///
/// Each call to ``authorize(_:)`` becomes a ``Call`` that the test receives from ``nextCall()``
/// and then releases one step at a time: succeed, fail, or enter the exchange phase first.
/// Nothing happens on its own, so a test decides every interleaving and never sleeps.
///
/// ```swift
/// let authorizer = ScriptedAuthorizer()
/// let coordinator = AuthCoordinator(authorizer: authorizer)
/// async let model = coordinator.authModel(for: key)
/// let call = await authorizer.nextCall()        // the coordinator called the authorizer
/// call.succeed(with: AuthModel(uid: "2088...", accessToken: "t1", mcUid: key.account))
/// #expect(try await model.accessToken == "t1")
/// ```
///
/// By default a call honours cancellation (it throws `CancellationError` when its task is
/// cancelled). With `ignoresCancellation: true` it keeps waiting for the test, like an
/// authorizer that answers after its deadline.
public final class ScriptedAuthorizer: Authorizer, @unchecked Sendable {
  /// What a call does next.
  public enum Step: Sendable {
    /// Return this model.
    case succeed(AuthModel)
    /// Throw this error.
    case fail(any Error)
    /// Enter ``/AuthCoordinator/AuthorizationRequest/exchange(_:)`` and wait for the next step
    /// inside it.
    case beginExchange
  }

  /// One call into the authorizer, controlled by the test.
  public final class Call: @unchecked Sendable {
    /// The request the coordinator passed.
    public let request: AuthorizationRequest
    /// The 0-based index of this call among all calls.
    public let index: Int

    private struct State {
      var pending: [Step] = []
      var waiter: CheckedContinuation<Step, Never>?
      var cancelled = false
      var cancelWatchers: [CheckedContinuation<Void, Never>] = []
      var inExchange = false
      var exchangeWatchers: [CheckedContinuation<Void, Never>] = []
    }

    private let state = LockedState(State())

    init(request: AuthorizationRequest, index: Int) {
      self.request = request
      self.index = index
    }

    /// The account being authorized.
    public var key: AccountKey { request.key }
    /// Why the coordinator asked.
    public var reason: AuthorizationReason { request.reason }
    /// Whether the coordinator cancelled this call's task.
    public var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// Releases the next step.
    ///
    /// - Parameter step: What the call does next.
    public func release(_ step: Step) {
      let waiter = state.withLock { state -> CheckedContinuation<Step, Never>? in
        if let waiter = state.waiter {
          state.waiter = nil
          return waiter
        }
        state.pending.append(step)
        return nil
      }
      waiter?.resume(returning: step)
    }

    /// Makes the call return `model`.
    ///
    /// - Parameter model: The model to return.
    public func succeed(with model: AuthModel) { release(.succeed(model)) }

    /// Makes the call throw `error`.
    ///
    /// - Parameter error: The error to throw.
    public func fail(with error: any Error) { release(.fail(error)) }

    /// Makes the call enter the exchange phase and wait for the next step there.
    public func beginExchange() { release(.beginExchange) }

    /// Waits until the coordinator cancels this call's task.
    public func waitUntilCancelled() async {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let done = state.withLock { state -> Bool in
          if state.cancelled { return true }
          state.cancelWatchers.append(continuation)
          return false
        }
        if done { continuation.resume() }
      }
    }

    /// Waits until the call has entered ``/AuthCoordinator/AuthorizationRequest/exchange(_:)``.
    public func waitUntilInExchange() async {
      await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        let done = state.withLock { state -> Bool in
          if state.inExchange { return true }
          state.exchangeWatchers.append(continuation)
          return false
        }
        if done { continuation.resume() }
      }
    }

    func markInExchange() {
      let watchers = state.withLock { state -> [CheckedContinuation<Void, Never>] in
        state.inExchange = true
        defer { state.exchangeWatchers.removeAll() }
        return state.exchangeWatchers
      }
      for watcher in watchers { watcher.resume() }
    }

    func nextStep(honoursCancellation: Bool) async -> Step {
      await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Step, Never>) in
          let ready = state.withLock { state -> Step? in
            if !state.pending.isEmpty { return state.pending.removeFirst() }
            if honoursCancellation, state.cancelled { return .fail(CancellationError()) }
            state.waiter = continuation
            return nil
          }
          if let ready { continuation.resume(returning: ready) }
        }
      } onCancel: {
        let (waiter, watchers) = state.withLock {
          state -> (CheckedContinuation<Step, Never>?, [CheckedContinuation<Void, Never>]) in
          state.cancelled = true
          let watchers = state.cancelWatchers
          state.cancelWatchers.removeAll()
          guard honoursCancellation, let waiter = state.waiter else { return (nil, watchers) }
          state.waiter = nil
          return (waiter, watchers)
        }
        for watcher in watchers { watcher.resume() }
        waiter?.resume(returning: .fail(CancellationError()))
      }
    }
  }

  private struct State {
    var calls: [Call] = []
    var delivered = 0
    var callWatchers: [CheckedContinuation<Call, Never>] = []
  }

  private let state = LockedState(State())
  private let honoursCancellation: Bool
  private let callsChanged = ChangeSignal()

  /// Creates an authorizer.
  ///
  /// - Parameter ignoresCancellation: When `true`, a cancelled call keeps waiting for the test
  ///   (and its result is then discarded by the coordinator).
  public init(ignoresCancellation: Bool = false) {
    self.honoursCancellation = !ignoresCancellation
  }

  /// How many times the coordinator called the authorizer.
  public var callCount: Int { state.withLock { $0.calls.count } }

  /// Every call so far, in order.
  public var calls: [Call] { state.withLock { $0.calls } }

  /// Waits until the coordinator has called the authorizer at least `count` times in all.
  ///
  /// Unlike ``nextCall()`` it delivers no call: use it when the test reads ``calls`` afterwards.
  ///
  /// - Parameters:
  ///   - count: How many calls to wait for, counting those already made.
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  /// - Throws: ``ChangeSignal/WaitError`` when the calls do not come within 30 seconds of real
  ///   time; `CancellationError` when the waiting task is cancelled.
  public func waitForCalls(_ count: Int, fileID: String = #fileID, line: Int = #line)
    async throws
  {
    try await callsChanged.waitUntil(fileID: fileID, line: line) { [state] in
      state.withLock { $0.calls.count >= count }
    }
  }

  /// Waits for the next call the test has not received yet.
  ///
  /// - Returns: The call, in the order the coordinator made them.
  public func nextCall() async -> Call {
    await withCheckedContinuation { (continuation: CheckedContinuation<Call, Never>) in
      let ready = state.withLock { state -> Call? in
        if state.delivered < state.calls.count {
          state.delivered += 1
          return state.calls[state.delivered - 1]
        }
        state.callWatchers.append(continuation)
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }

  /// Runs the scripted steps of one call.
  ///
  /// - Parameter request: The coordinator's request.
  /// - Returns: The model the test released.
  /// - Throws: The error the test released, or `CancellationError`.
  public func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let (call, watcher) = state.withLock { state -> (Call, CheckedContinuation<Call, Never>?) in
      let call = Call(request: request, index: state.calls.count)
      state.calls.append(call)
      guard !state.callWatchers.isEmpty else { return (call, nil) }
      state.delivered += 1
      return (call, state.callWatchers.removeFirst())
    }
    watcher?.resume(returning: call)
    callsChanged.changed()
    return try await run(call, request: request, inExchange: false)
  }

  private func run(_ call: Call, request: AuthorizationRequest, inExchange: Bool) async throws
    -> AuthModel
  {
    switch await call.nextStep(honoursCancellation: honoursCancellation) {
    case .succeed(let model):
      return model
    case .fail(let error):
      throw error
    case .beginExchange:
      precondition(!inExchange, "ScriptedAuthorizer: beginExchange released twice")
      return try await request.exchange {
        call.markInExchange()
        return try await run(call, request: request, inExchange: true)
      }
    }
  }
}
