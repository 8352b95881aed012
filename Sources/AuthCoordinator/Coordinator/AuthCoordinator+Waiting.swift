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
    /// A forced refresh of the token a flight is persisting: the caller waits with this ticket
    /// for the flight to end, then asks again rejecting `rejecting` (set by
    /// ``AuthCoordinator/ticket(for:key:refresh:)``).
    case retry(WaiterQueue, ticket: Int, rejecting: String)

    /// Whether it is a ``hit(_:)``, read in place: matching the case in the caller's async
    /// function copied the whole model-sized enum into its frame. (So did one `case` with two
    /// patterns, here and in ``AuthCoordinator/authModel(for:refresh:timeout:)``: each case has
    /// a label of its own.)
    @inlinable
    var isHit: Bool {
      switch self {
      case .hit: true
      case .joined: false
      case .miss: false
      case .retry: false
      }
    }

    /// The ticket to park with and the token to reject afterwards, if it holds one: out of
    /// line, as ``isHit``.
    @inline(never)
    var pending: (WaiterQueue, Int, String?)? {
      switch self {
      case .joined(let queue, let ticket): (queue, ticket, nil)
      case .retry(let queue, let ticket, let rejecting): (queue, ticket, rejecting)
      case .hit: nil
      case .miss: nil
      }
    }

    /// Becomes the ``hit(_:)`` with the model a caller woken with `wake` from `queue` gets, or
    /// throws its error. Out of line, like ``WaiterQueue/result(of:)``: the model is a
    /// temporary of this frame only.
    @inline(never) @usableFromInline
    mutating func fill(from queue: WaiterQueue, _ wake: WaiterQueue.Wake) throws {
      self = .hit(try queue.result(of: wake))
    }
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

  /// Admits the request unless it holds a ticket already, and returns the ticket to park with
  /// when it has one and nothing to ask again afterwards. Otherwise `found` says what is
  /// left: a ``Lookup/hit(_:)`` (admission answered at once), or a
  /// ``Lookup/retry(_:ticket:rejecting:)`` (a forced refresh that waits for a flight to end
  /// and asks again). The ticket comes back in two registers: returned with the token to
  /// reject (33 bytes, through memory), it took the frame that parks 16 bytes more.
  @inline(never) @usableFromInline
  func ticket(
    for found: inout Lookup, key: AccountKey, refresh: RefreshPolicy
  ) throws -> (WaiterQueue, Int)? {
    switch found {
    case .joined(let queue, let ticket): return (queue, ticket)
    case .retry: return nil
    case .hit: return nil
    case .miss: break
    }
    switch try admit(key, refresh: refresh) {
    case .answered(let answer):
      found = .hit(try answer.get())
      return nil
    case .wait(let queue, let ticket):
      found = .joined(queue, ticket: ticket)
      return (queue, ticket)
    case .retryAfter(let queue, let ticket, let rejecting):
      found = .retry(queue, ticket: ticket, rejecting: rejecting)
      return nil
    }
  }

  /// The requests ``authModel(for:refresh:timeout:)`` does not park itself: one with a
  /// deadline of its own, whose every park is bounded by it, and a forced refresh that waits
  /// for a flight to end and asks again, as often as admission says so. It starts from
  /// `found`: a hit (nothing left to do), a ticket (joined or admitted), a retry, or a miss.
  @inline(never) @usableFromInline
  nonisolated(nonsending) func settleSlowly(
    _ found: inout Lookup, key: AccountKey, refresh: RefreshPolicy, timeout: Duration?
  ) async throws {
    let deadline = timeout.map { clock.deadline(after: $0) }
    var refresh = refresh
    while !found.isHit {
      _ = try ticket(for: &found, key: key, refresh: refresh)
      guard let (queue, ticket, rejecting) = found.pending else { return }
      let wake =
        if let deadline {
          await park(on: queue, ticket: ticket, until: deadline)
        } else {
          await queue.park(ticket)
        }
      guard let rejecting else { return try found.fill(from: queue, wake) }
      // Rare: a forced refresh of the token a flight is persisting asks again once it ended.
      try queue.checkEnded(wake)
      found = .miss
      refresh = .force(rejecting: rejecting)
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
