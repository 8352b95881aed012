import AuthCoordinator
import Foundation
import SyncPrimitives

/// The issuer's metadata, read once for the life of an authorizer (its copies share it).
///
/// Callers that find no metadata while a fetch is running wait for that fetch: one metadata
/// request however many keys ask for a token at once. A fetch that fails leaves nothing cached
/// and fails each of its waiters; the next caller fetches again. A success is kept for good.
final class MetadataCache: Sendable {
  /// The configured issuer.
  let issuer: URL

  private enum State: Sendable {
    case empty
    case fetching(Task<OAuth2Authorizer.ServerMetadata, any Error>)
    case ready(OAuth2Authorizer.ServerMetadata)
  }

  /// What a caller does: use the metadata, or wait for a fetch.
  private enum Step {
    case ready(OAuth2Authorizer.ServerMetadata)
    case wait(Task<OAuth2Authorizer.ServerMetadata, any Error>)
  }

  private let state = LockedState<State>(.empty)

  init(issuer: URL) { self.issuer = issuer }

  /// The metadata once read, or `nil`.
  var cached: OAuth2Authorizer.ServerMetadata? {
    state.withLock { state in
      if case .ready(let metadata) = state { return metadata }
      return nil
    }
  }

  /// The cached metadata, or the result of the running fetch, or of a new one.
  ///
  /// - Parameter fetch: Reads the metadata; run at most once at a time.
  /// - Throws: What `fetch` threw (nothing is cached then); `CancellationError` when the caller
  ///   is cancelled (the fetch goes on for the other waiters).
  func metadata(
    fetch: @escaping @Sendable () async throws -> OAuth2Authorizer.ServerMetadata
  ) async throws -> OAuth2Authorizer.ServerMetadata {
    let step: Step = state.withLock { state in
      switch state {
      case .ready(let metadata):
        return .ready(metadata)
      case .fetching(let task):
        return .wait(task)
      case .empty:
        let task = Task { try await fetch() }
        state = .fetching(task)
        return .wait(task)
      }
    }
    let task: Task<OAuth2Authorizer.ServerMetadata, any Error>
    switch step {
    case .ready(let metadata): return metadata
    case .wait(let running): task = running
    }
    let result = await task.result
    // Re-read after the suspension: only the fetch this caller waited for is settled here.
    state.withLock { state in
      guard case .fetching(let running) = state, running == task else { return }
      switch result {
      case .success(let metadata): state = .ready(metadata)
      case .failure: state = .empty
      }
    }
    try Task.checkCancellation()
    return try result.get()
  }
}
