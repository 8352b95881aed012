import AuthCoordinator
import Foundation

/// Baseline "actor + shared Task" (the WWDC image-downloader pattern).
///
/// The actor remembers the in-flight `Task` per key; later callers `await task.value`. Every
/// waiter hops back onto the actor when the task finishes (awaiters of a task wake in reverse
/// order), and a cancelled caller keeps waiting: there is no per-caller cancellation.
actor SharedTaskSource: TokenSource {
  nonisolated let impl = Impl.sharedTask
  private var models: [AccountKey: AuthModel]
  private var flights: [AccountKey: Task<AuthModel, any Error>] = [:]
  private let authorize: Authorize
  private let now: @Sendable () -> Date
  private let parkedCount = LockedState(0)

  init(
    seed: [AccountKey: AuthModel], authorize: @escaping Authorize,
    now: @escaping @Sendable () -> Date
  ) {
    models = seed
    self.authorize = authorize
    self.now = now
  }

  nonisolated var parked: Int { parkedCount.withLock { $0 } }

  func get(_ key: AccountKey) async throws -> AuthModel {
    if let model = models[key], model.isValid(at: now(), leeway: refreshLeeway) { return model }
    return try await join(key)
  }

  func refresh(_ key: AccountKey, rejecting token: String) async throws -> AuthModel {
    if let model = models[key], model.accessToken != token,
      model.isValid(at: now(), leeway: refreshLeeway)
    {
      return model
    }
    return try await join(key)
  }

  private func join(_ key: AccountKey) async throws -> AuthModel {
    let flight: Task<AuthModel, any Error>
    if let running = flights[key] {
      flight = running
    } else {
      let authorize = self.authorize
      flight = Task { try await authorize(key) }
      flights[key] = flight
    }
    parkedCount.withLock { $0 += 1 }
    do {
      let model = try await flight.value
      if flights[key] == flight {
        models[key] = model
        flights[key] = nil
      }
      return model
    } catch {
      if flights[key] == flight { flights[key] = nil }
      throw error
    }
  }
}
