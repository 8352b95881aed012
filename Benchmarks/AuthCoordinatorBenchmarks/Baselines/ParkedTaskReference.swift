import AuthCoordinator
import Foundation

/// Reference, not a baseline: the cheapest way a caller can wait for one authorization.
///
/// Callers park on an unsafe continuation in an array preallocated to `capacity` (so parking
/// allocates nothing on the heap but the caller's own task) and are resumed outside the lock in
/// arrival order. B2 subtracts its heap per caller from the coordinator's to bound the
/// coordinator's own heap per waiter, and shows its wake-up cost as the floor.
final class ParkedTaskReference: TokenSource {
  let impl = Impl.parkedTask
  private typealias Waiter = UnsafeContinuation<AuthModel, any Error>

  private struct State {
    var waiters: [Waiter]
    var started = false
  }

  private let state: LockedState<State>
  private let authorize: Authorize

  init(authorize: @escaping Authorize, capacity: Int) {
    var waiters: [Waiter] = []
    waiters.reserveCapacity(capacity)
    state = LockedState(State(waiters: waiters))
    self.authorize = authorize
  }

  var parked: Int { state.withLock { $0.waiters.count } }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    try await withUnsafeThrowingContinuation { (waiter: Waiter) in
      let starts = state.withLock { state -> Bool in
        state.waiters.append(waiter)
        defer { state.started = true }
        return !state.started
      }
      if starts { Task { await self.run(key) } }
    }
  }

  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel {
    try await get(key)
  }

  private func run(_ key: AccountKey) async {
    let result: Result<AuthModel, any Error>
    do { result = .success(try await authorize(key)) } catch { result = .failure(error) }
    let waiters = state.withLock { state -> [Waiter] in
      defer {
        state.waiters.removeAll()
        state.started = false
      }
      return state.waiters
    }
    for waiter in waiters { waiter.resume(with: result) }
  }
}
