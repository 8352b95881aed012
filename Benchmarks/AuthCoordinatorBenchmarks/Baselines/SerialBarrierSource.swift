import AuthCoordinator
import Foundation

/// Baseline "serial barrier" (Auth0's credentials manager).
///
/// Every call, hit or miss, runs alone behind a FIFO barrier and re-reads the store; the first
/// caller that finds the model expired (or rejected) authorizes and saves, and each caller after
/// it finds the new model in the store. Correct, but all callers of all keys queue one by one.
final class SerialBarrierSource: TokenSource {
  let impl = Impl.serialBarrier
  private let store: InMemoryTokenStore
  private let barrier = AsyncBarrier()
  private let authorizing = LockedState(0)
  private let authorize: Authorize
  private let now: @Sendable () -> Date

  init(
    seed: [AccountKey: AuthModel], authorize: @escaping Authorize,
    now: @escaping @Sendable () -> Date
  ) {
    store = InMemoryTokenStore(seed)
    self.authorize = authorize
    self.now = now
  }

  /// Callers queued at the barrier plus the one inside the authorizer.
  var parked: Int { barrier.queued + authorizing.withLock { $0 } }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    try await serially(key, rejecting: nil)
  }

  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel {
    try await serially(key, rejecting: token)
  }

  private nonisolated(nonsending) func serially(
    _ key: AccountKey, rejecting token: String?
  ) async throws -> AuthModel {
    await barrier.enter()
    defer { barrier.leave() }
    if let model = await store.model(for: key), model.accessToken != token,
      model.isValid(at: now(), leeway: refreshLeeway)
    {
      return model
    }
    authorizing.withLock { $0 += 1 }
    let fresh = try await authorize(key)
    await store.save(fresh, for: key)
    return fresh
  }
}

/// A FIFO async mutex: `enter` suspends while another caller is inside; `leave` hands the
/// barrier straight to the longest waiter.
final class AsyncBarrier: Sendable {
  private struct State {
    var held = false
    var queue: [UnsafeContinuation<Void, Never>] = []
    var head = 0
    var queuedTotal = 0
  }

  private let state = LockedState(State())

  /// Callers that have had to wait (cumulative).
  var queued: Int { state.withLock { $0.queuedTotal } }

  func enter() async {
    let acquired = state.withLock { state -> Bool in
      if state.held { return false }
      state.held = true
      return true
    }
    if acquired { return }
    await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
      let acquiredNow = state.withLock { state -> Bool in
        if !state.held {
          state.held = true
          return true
        }
        state.queue.append(continuation)
        state.queuedTotal += 1
        return false
      }
      if acquiredNow { continuation.resume() }
    }
  }

  func leave() {
    let next = state.withLock { state -> UnsafeContinuation<Void, Never>? in
      guard state.head < state.queue.count else {
        state.held = false
        return nil
      }
      let next = state.queue[state.head]
      state.head += 1
      if state.head == state.queue.count {
        state.queue.removeAll(keepingCapacity: true)
        state.head = 0
      }
      return next  // ownership passes on: `held` stays true
    }
    next?.resume()
  }
}
