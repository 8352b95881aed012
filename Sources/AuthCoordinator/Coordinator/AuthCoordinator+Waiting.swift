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
      }
    }

    /// Becomes the ``hit(_:)`` with the model a caller woken with `wake` from `queue` gets, or
    /// throws its error. Out of line, like ``WaiterQueue/result(of:)``: the model is a
    /// temporary of this frame only.
    @inline(never)
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

  /// Everything but a hit: parks on the flight the request joined in ``lookup(_:)``, or admits
  /// it (``admit(_:refresh:)``) and parks on the flight it joined or started; then leaves the
  /// model in `found` as ``Lookup/hit(_:)``, or throws.
  ///
  /// The model travels in `found`, the caller's own variable, never as an async call's result:
  /// each such result takes a model-sized temporary in the frame that receives it. This frame
  /// parks the caller itself, so the common case (no deadline, one park) takes the entry
  /// point's frame, this one, and the park's handler and continuation: a first caller in B5
  /// fits in its task's first allocation slab (docs/benchmarks.md, "a flight in two slabs").
  /// A deadline of the caller's own, and a forced refresh that must wait for a flight to end
  /// and ask again, go on in ``settleSlowly(_:key:refresh:timeout:from:)``.
  @inline(never) @usableFromInline
  nonisolated(nonsending) func settle(
    _ found: inout Lookup, key: AccountKey, refresh: RefreshPolicy, timeout: Duration?
  ) async throws {
    guard timeout == nil,
      let (queue, ticket, rejecting) = try ticket(for: &found, key: key, refresh: refresh)
    else { return try await settleSlowly(&found, key: key, refresh: refresh, timeout: timeout) }
    // The token unwrapped: passed on as an optional, it took this frame 16 bytes past what a
    // first caller has in its slab (B5's heap threshold fails then).
    if let rejecting {
      return try await settleSlowly(
        &found, key: key, refresh: refresh, timeout: nil, from: (queue, ticket, rejecting))
    }
    // `WaiterQueue/park(_:)`, written out: its frame would come between this one and the
    // handler's.
    let wake = await withTaskCancellationHandler {
      await withUnsafeContinuation { queue.park(ticket, $0) }
    } onCancel: {
      queue.leave(ticket, .cancelled)
    }
    try found.fill(from: queue, wake)
  }

  /// The ticket to park with: the one the request joined with in ``lookup(_:)``, or the one
  /// ``admit(_:refresh:)`` gives it, with the token to reject when it asks again after the
  /// flight ended, if admission says so. Nil when admission answered at once: the model is
  /// then in `found`.
  @inline(never)
  func ticket(
    for found: inout Lookup, key: AccountKey, refresh: RefreshPolicy
  ) throws -> (WaiterQueue, Int, String?)? {
    if case .joined(let queue, let ticket) = found { return (queue, ticket, nil) }
    switch try admit(key, refresh: refresh) {
    case .answered(let answer):
      found = .hit(try answer.get())
      return nil
    case .wait(let queue, let ticket):
      return (queue, ticket, nil)
    case .retryAfter(let queue, let ticket, let rejecting):
      return (queue, ticket, rejecting)
    }
  }

  /// What ``settle(_:key:refresh:timeout:)`` leaves: a request with a deadline of its own, whose
  /// every park is bounded by it, and a forced refresh that waits for a flight to end and asks
  /// again, as often as admission says so. It starts from `admitted` (a ticket admission
  /// already gave) if there is one, else from `found`: a hit (an immediate answer: nothing left
  /// to do), a ticket the request joined with, or a miss.
  @inline(never)
  nonisolated(nonsending) func settleSlowly(
    _ found: inout Lookup, key: AccountKey, refresh: RefreshPolicy, timeout: Duration?,
    from admitted: (WaiterQueue, Int, String)? = nil
  ) async throws {
    let deadline = timeout.map { clock.deadline(after: $0) }
    var refresh = refresh
    var next: (WaiterQueue, Int, String?)? = admitted.map { ($0, $1, $2) }
    while true {
      if next == nil, !found.isHit { next = try ticket(for: &found, key: key, refresh: refresh) }
      guard let (queue, ticket, rejecting) = next else { return }
      next = nil
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
