import Foundation
import SyncPrimitives

// The caller's side: a hit under the stripe's lock, or admission and then parking on the
// flight, outside any lock, with an optional deadline of the caller's own.
extension AuthCoordinator {
  /// The valid cached model of `key`, if there is one: one lock, one lookup.
  ///
  /// Out of line on purpose: inlined into the async `authModel`, its temporaries (the hasher,
  /// the slot copy) became part of every caller's async frame, parked callers included.
  @inline(never)
  func hit(_ key: AccountKey) -> AuthModel? {
    let date = configuration.now()
    let stripe = table.stripe(for: key)
    let tick = table.nextTick()
    stripe.lock.lock()
    guard let index = stripe.accounts.index(forKey: key),
      let model = stripe.accounts.values[index].machine.servableModel(at: date)
    else {
      stripe.lock.unlock()
      return nil
    }
    stripe.accounts.values[index].lastUsed = tick
    stripe.lock.unlock()
    stripe.hits.add(1)
    return model
  }

  /// A miss, or a forced refresh: admit the request, then (usually) park on the flight.
  ///
  /// Kept lean on purpose: only the queue, the ticket, the retry state and the deadline are
  /// live across the park, and the result is read synchronously (out of line) after waking, so
  /// a parked caller's async frames stay small (see docs/benchmarks.md, "Memory per parked
  /// caller").
  @inline(never)
  nonisolated(nonsending) func wait(
    for key: AccountKey, refresh: RefreshPolicy, timeout: Duration?
  ) async throws -> AuthModel {
    var refresh = refresh
    let deadline = timeout.map { clock.deadline(after: $0) }
    while true {
      switch try admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
      case .retryAfter(let queue, let ticket, let rejecting):
        // Rare: a forced refresh of the token a flight is persisting asks again once it ended.
        try queue.checkEnded(await park(on: queue, ticket: ticket, until: deadline))
        refresh = .force(rejecting: rejecting)
      }
    }
  }

  /// Parks on `queue`; with a deadline, a timer makes the caller leave when it passes.
  @inline(never)
  nonisolated(nonsending) func park(
    on queue: WaiterQueue, ticket: Int, until deadline: Duration?
  ) async -> WaiterQueue.Wake {
    guard let deadline else { return await queue.park(ticket) }
    let clock = self.clock
    let timer = Task {
      do { try await clock.sleepUntil(deadline) } catch { return }
      queue.leave(ticket, .timedOut)
    }
    defer { timer.cancel() }
    return await queue.park(ticket)
  }
}
