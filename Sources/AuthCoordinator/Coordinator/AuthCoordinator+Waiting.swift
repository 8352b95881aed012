import Foundation
import SyncPrimitives

// The caller's side: a hit from the thread's replica or under the stripe's lock, or admission
// and then parking on the flight, outside any lock, with an optional deadline of the caller's
// own.
extension AuthCoordinator {
  /// What an ordinary request finds in its thread's replica or under one lock acquisition.
  @usableFromInline
  enum Lookup {
    /// A valid cached model.
    case hit(AuthModel)
    /// A flight is running: the caller joined it with this ticket.
    case joined(WaiterQueue, ticket: Int)
    /// Neither: the caller asks again through ``admit(_:refresh:)``.
    case miss
  }

  /// An ordinary request's fast path: the valid cached model, from the thread's replica
  /// (``HitReplicas``) with no lock, or under one lock acquisition; or a ticket on the flight
  /// in progress (an ordinary request always joins a running flight), in that acquisition.
  ///
  /// Out of line on purpose: inlined into the async `authModel`, its temporaries (the hasher,
  /// the slot) became part of every caller's async frame, parked callers included.
  @inline(never) @usableFromInline
  func lookup(_ key: AccountKey) -> Lookup {
    let date = configuration.now()
    let hash = AccountTable.hash(ofUser: key.account)
    let replicas = HitReplicas.current
    if let model = replicas?.serve(key, hash: hash, coordinator: replicaID, at: date) {
      return .hit(model)
    }
    let stripe = table.stripe(hash: hash)
    let tick = table.nextTick()
    stripe.lock.lockToRead()
    guard let slot = stripe.slot(key) else {
      stripe.lock.unlock()
      replicas?.forget(key, hash: hash, coordinator: replicaID)
      return .miss
    }
    slot.lastUsed = tick
    if let (model, window) = slot.machine.servable(at: date) {
      stripe.hits &+= 1
      let seen = stripe.lock.epoch.value
      stripe.lock.unlock()
      (replicas ?? HitReplicas.forThisThread).noteHit(
        key, hash: hash, coordinator: replicaID, counts: replicaHits, model: model,
        window: window, epoch: stripe.lock.epoch, seen: seen)
      return .hit(model)
    }
    // Not a hit: what follows may change the key's machine, and this thread's copy of its
    // model, if any, is of no further use.
    stripe.lock.markChanged()
    defer { replicas?.forget(key, hash: hash, coordinator: replicaID) }
    // A caller cancelled before it arrives never joins: admission throws for it.
    // With a flight in progress (and only then: a request on an idle key would start one), an
    // ordinary request joins it.
    guard let flight = slot.machine.effects, !Task.isCancelled,
      case .join = slot.machine.request(.ifNeeded, date: date, now: clock.now(), newFlightID: 0),
      let ticket = flight.queue.reserve(coalesced: true)
    else {
      stripe.lock.unlock()
      return .miss
    }
    stripe.lock.unlock()
    return .joined(flight.queue, ticket: ticket)
  }

  /// A caller that joined the flight in progress through ``lookup(_:)``: park on it.
  @inline(never) @usableFromInline
  nonisolated(nonsending) func joined(
    _ queue: WaiterQueue, ticket: Int, timeout: Duration?
  ) async throws -> AuthModel {
    guard let timeout else { return try queue.result(of: await queue.park(ticket)) }
    let deadline = clock.deadline(after: timeout)
    return try queue.result(of: await park(on: queue, ticket: ticket, until: deadline))
  }

  /// A miss, or a forced refresh, with no deadline of the caller's own.
  @inline(never) @usableFromInline
  nonisolated(nonsending) func wait(
    for key: AccountKey, refresh: RefreshPolicy
  ) async throws -> AuthModel {
    try await waitLoop(key, refresh) { queue, ticket in await queue.park(ticket) }
  }

  /// A miss, or a forced refresh, that gives up at the caller's own deadline: every park of
  /// the request is bounded by the same deadline.
  @inline(never) @usableFromInline
  nonisolated(nonsending) func wait(
    for key: AccountKey, refresh: RefreshPolicy, timeout: Duration
  ) async throws -> AuthModel {
    let deadline = clock.deadline(after: timeout)
    return try await waitLoop(key, refresh) { queue, ticket in
      await park(on: queue, ticket: ticket, until: deadline)
    }
  }

  /// The one waiting loop: admit the request, then (usually) park on the flight.
  ///
  /// Inlined into the two entry points above so that each parked caller's async frames hold
  /// only what its own path needs: the queue, the ticket, the retry state (and the deadline).
  /// The result is read synchronously, out of line, after waking. Frames that overflow the
  /// task's first allocation slab cost a second allocation per parked caller (see
  /// docs/benchmarks.md, "Memory per parked caller").
  @inline(__always)
  nonisolated(nonsending) func waitLoop(
    _ key: AccountKey, _ refresh: RefreshPolicy,
    park: (WaiterQueue, Int) async -> WaiterQueue.Wake
  ) async throws -> AuthModel {
    var refresh = refresh
    while true {
      switch try admit(key, refresh: refresh) {
      case .answered(let answer):
        return try answer.get()
      case .wait(let queue, let ticket):
        return try queue.result(of: await park(queue, ticket))
      case .retryAfter(let queue, let ticket, let rejecting):
        // Rare: a forced refresh of the token a flight is persisting asks again once it ended.
        try queue.checkEnded(await park(queue, ticket))
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
}
