import AuthCoordinator
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
  private let state = LockedState<
    (
      held: Set<Operation>, failing: Set<Operation>,
      waiters: [Operation: [CheckedContinuation<Void, Never>]]
    )
  >(([], [], [:]))

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

  private func pass(_ operation: Operation) async throws {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let wait = state.withLock { state -> Bool in
        guard state.held.contains(operation) else { return false }
        state.waiters[operation, default: []].append(continuation)
        return true
      }
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
  }

  func removeModel(for key: AccountKey) async throws {
    try await pass(.remove)
    await inner.removeModel(for: key)
  }

  func removeModels(forMcUid mcUid: String) async throws {
    try await pass(.remove)
    await inner.removeModels(forMcUid: mcUid)
  }

  func removeAll() async throws {
    try await pass(.remove)
    await inner.removeAll()
  }
}

/// A custom store written before ``TokenStore/removeModels(forMcUid:)`` existed: it relies on
/// the protocol's default implementation.
actor LegacyDictionaryStore: TokenStore {
  private(set) var models: [AccountKey: AuthModel]
  private(set) var removeAllCalls = 0

  init(_ models: [AccountKey: AuthModel]) { self.models = models }

  func model(for key: AccountKey) async throws -> AuthModel? { models[key] }
  func save(_ model: AuthModel, for key: AccountKey) async throws { models[key] = model }
  func removeModel(for key: AccountKey) async throws { models[key] = nil }
  func removeAll() async throws {
    removeAllCalls += 1
    models.removeAll()
  }
}
