import Foundation
import SyncPrimitives

// The caller side of a miss: entering the actor, then parking on the flight outside it.
extension AuthCoordinator {
  // MARK: - Slow path (caller side)

  // The entry point keeps only the lookup: its async frame is allocated on every call, hits
  // included, so the waiting paths live in functions of their own.

  /// A caller that joined the flight in progress through the hot cache: park on it.
  @inline(never)
  nonisolated(nonsending) func joined(
    _ queue: WaiterQueue, ticket: Int, _ timeout: Duration?
  ) async throws -> AuthModel {
    guard let timeout else { return try queue.result(of: await queue.park(ticket)) }
    let deadline = clock.deadline(after: timeout)
    return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
  }

  /// A miss with no flight to join, or a forced refresh: ask the actor.
  @inline(never)
  nonisolated(nonsending) func missed(
    _ key: AccountKey, refresh: RefreshPolicy, _ timeout: Duration?
  ) async throws -> AuthModel {
    guard let timeout else { return try await authModelSlowPath(key, refresh: refresh) }
    return try await authModelWithTimeout(key, refresh: refresh, timeout: timeout)
  }

  /// A miss: enter the actor, then (usually) park on the flight outside it.
  ///
  /// Kept lean on purpose: only the queue, the ticket and the retry state are live across the
  /// park, and the result is read synchronously (out of line) after waking, so a parked caller's
  /// async frames stay small (see docs/benchmarks.md, "Memory per parked caller").
  @inline(__always)
  nonisolated(nonsending) func authModelSlowPath(
    _ key: AccountKey, refresh: RefreshPolicy
  ) async throws -> AuthModel {
    var refresh = refresh
    while true {
      switch try await admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await queue.park(ticket))
      case .retryAfter(let queue, let ticket, let rejecting):
        // Rare: a forced refresh of the token a flight is persisting asks again once it ended.
        try queue.checkEnded(await queue.park(ticket))
        refresh = .force(rejecting: rejecting)
      }
    }
  }

  /// Parks on `queue` with a timer that makes the caller leave at `deadline`.
  @inline(never)
  nonisolated(nonsending) func park(
    on queue: WaiterQueue, ticket: Int, until deadline: Duration
  ) async -> WaiterQueue.Wake {
    let clock = self.clock
    let timer = Task {
      do { try await clock.sleepUntil(deadline) } catch { return }
      queue.leave(ticket, .timedOut)
    }
    defer { timer.cancel() }
    return await queue.park(ticket)
  }

  /// A request with the caller's own timeout: every park is bounded by the same deadline.
  @inline(never)
  nonisolated(nonsending) func authModelWithTimeout(
    _ key: AccountKey, refresh: RefreshPolicy, timeout: Duration
  ) async throws -> AuthModel {
    var refresh = refresh
    let deadline = clock.deadline(after: timeout)
    while true {
      switch try await admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
      case .retryAfter(let queue, let ticket, let rejecting):
        try queue.checkEnded(await park(on: queue, ticket: ticket, until: deadline))
        refresh = .force(rejecting: rejecting)
      }
    }
  }
}
