import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// A store whose operations can be held (a stuck disk, a lock held by another process) or made
/// to fail, one kind of operation at a time. Backed by an ``InMemoryTokenStore``.
///
/// A held operation does not return, even when its task is cancelled, until ``release(_:)``:
/// that is what a store stuck in a system call does.
final class GatedStore: TokenStore, @unchecked Sendable {
  enum Operation: Hashable, Sendable {
    case load
    case save
    case remove
  }

  struct Failure: Error {}

  let inner: InMemoryTokenStore
  /// Signalled after every operation that reached ``inner``, so that a test can await what the
  /// store holds (an operation the coordinator runs in the background emits no event).
  let changes = ChangeSignal()
  private struct State {
    var held: Set<Operation> = []
    var failing: Set<Operation> = []
    var waiters: [Operation: [CheckedContinuation<Void, Never>]] = [:]
    /// Tests waiting (in ``waitForHeld(_:_:)``) until this many operations are held.
    var watchers:
      [(operation: Operation, count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }
  private let state = LockedState(State())

  init(_ models: [AccountKey: AuthModel] = [:]) { inner = InMemoryTokenStore(models) }

  /// Makes later operations of this kind wait until ``release(_:)``.
  func hold(_ operation: Operation) { state.withLock { _ = $0.held.insert(operation) } }

  /// Makes later operations of this kind throw.
  func fail(_ operation: Operation, _ fails: Bool = true) {
    state.withLock {
      if fails { $0.failing.insert(operation) } else { $0.failing.remove(operation) }
    }
  }

  /// Lets held operations of this kind proceed, and later ones run at once.
  func release(_ operation: Operation) {
    let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.held.remove(operation)
      return state.waiters.removeValue(forKey: operation) ?? []
    }
    for waiter in waiters { waiter.resume() }
  }

  /// How many operations of this kind are waiting.
  func heldCount(_ operation: Operation) -> Int {
    state.withLock { $0.waiters[operation]?.count ?? 0 }
  }

  /// Waits (without polling) until at least `count` operations of this kind are held: the
  /// store's own signal, as the coordinator emits no event when a store operation starts.
  func waitForHeld(_ operation: Operation, _ count: Int = 1) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = state.withLock { state -> Bool in
        if state.waiters[operation, default: []].count >= count { return true }
        state.watchers.append((operation, count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  private func pass(_ operation: Operation) async throws {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let (wait, ready) = state.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
        guard state.held.contains(operation) else { return (false, []) }
        state.waiters[operation, default: []].append(continuation)
        let count = state.waiters[operation, default: []].count
        var ready: [CheckedContinuation<Void, Never>] = []
        state.watchers.removeAll { watcher in
          guard watcher.operation == operation, watcher.count <= count else { return false }
          ready.append(watcher.continuation)
          return true
        }
        return (true, ready)
      }
      for watcher in ready { watcher.resume() }
      if !wait { continuation.resume() }
    }
    if state.withLock({ $0.failing.contains(operation) }) { throw Failure() }
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    try await pass(.load)
    return await inner.model(for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    try await pass(.save)
    await inner.save(model, for: key)
    changes.changed()
  }

  func removeModel(for key: AccountKey) async throws {
    try await pass(.remove)
    await inner.removeModel(for: key)
    changes.changed()
  }

  func removeModels(forAccount account: String) async throws {
    try await pass(.remove)
    await inner.removeModels(forAccount: account)
    changes.changed()
  }

  func removeAll() async throws {
    try await pass(.remove)
    await inner.removeAll()
    changes.changed()
  }
}
