import AuthCoordinator
import Foundation

/// Baseline "pending-callbacks list under a lock" (AppAuth's performActionWithFreshTokens).
///
/// A hit is a locked read. On a miss the first caller starts the refresh and later callers
/// append their completion (here an unsafe continuation) to the key's list; when the refresh
/// ends the list is taken under the lock and every completion is called outside it, in arrival
/// order. No per-caller cancellation.
final class CallbackListSource: TokenSource {
  let impl = Impl.callbackList
  private typealias Completion = UnsafeContinuation<AuthModel, any Error>

  private struct State {
    var models: [AccountKey: AuthModel]
    var pending: [AccountKey: [Completion]] = [:]
    var parked = 0
  }

  private let state: LockedState<State>
  private let authorize: Authorize
  private let now: @Sendable () -> Date

  init(
    seed: [AccountKey: AuthModel], authorize: @escaping Authorize,
    now: @escaping @Sendable () -> Date
  ) {
    state = LockedState(State(models: seed))
    self.authorize = authorize
    self.now = now
  }

  var parked: Int { state.withLock { $0.parked } }

  @inline(__always)
  nonisolated(nonsending) func get(_ key: AccountKey) async throws -> AuthModel {
    try await perform(key, rejecting: nil)
  }

  nonisolated(nonsending) func refresh(
    _ key: AccountKey, rejecting token: String
  ) async throws -> AuthModel {
    try await perform(key, rejecting: token)
  }

  private nonisolated(nonsending) func perform(
    _ key: AccountKey, rejecting token: String?
  ) async throws -> AuthModel {
    let date = now()
    let cached = state.withLock { state -> AuthModel? in
      guard let model = state.models[key], model.accessToken != token,
        model.isValid(at: date, leeway: refreshLeeway)
      else { return nil }
      return model
    }
    if let cached { return cached }
    return try await withUnsafeThrowingContinuation { (completion: Completion) in
      let next = state.withLock { state -> Next in
        // A refresh may have finished since the unlocked check above.
        if let model = state.models[key], model.accessToken != token,
          model.isValid(at: date, leeway: refreshLeeway)
        {
          return .served(model)
        }
        state.parked += 1
        if state.pending[key] != nil {
          state.pending[key]!.append(completion)
          return .wait
        }
        state.pending[key] = [completion]
        return .start
      }
      switch next {
      case .served(let model): completion.resume(returning: model)
      case .wait: break
      case .start: Task { await self.runRefresh(key) }
      }
    }
  }

  private enum Next {
    case served(AuthModel)
    case wait
    case start
  }

  private func runRefresh(_ key: AccountKey) async {
    let result: Result<AuthModel, any Error>
    do { result = .success(try await authorize(key)) } catch { result = .failure(error) }
    let completions = state.withLock { state -> [Completion] in
      if case .success(let model) = result { state.models[key] = model }
      return state.pending.removeValue(forKey: key) ?? []
    }
    for completion in completions { completion.resume(with: result) }
  }
}
