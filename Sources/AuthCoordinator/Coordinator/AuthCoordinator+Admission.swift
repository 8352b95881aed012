import Foundation
import SyncPrimitives

// A request admitted under its stripe's lock: the state machine decides, the coordinator does
// the bookkeeping there and every effect after the lock is released.
extension AuthCoordinator {
  @inline(never)  // its temporaries would otherwise land in the parked caller's async frame
  func admit(_ key: AccountKey, refresh: RefreshPolicy) throws -> Admission {
    // A caller cancelled before it arrives never joins or starts a flight.
    try Task.checkCancellation()
    let date = configuration.now()
    let now = clock.now()
    let stripe = table.stripe(for: key)
    let tick = table.nextTick()
    stripe.lock.lock()
    let slot: AccountSlot
    let isNew: Bool
    if let existing = stripe.slot(key) {
      slot = existing
      isNew = false
    } else {
      slot = AccountSlot(
        machine: KeyMachine(key: key, settings: machineSettings))
      stripe.accounts[key] = slot
      table.inserted.add(1)
      isNew = true
    }
    slot.lastUsed = tick
    let action = slot.machine.request(
      refresh, date: date, now: now, newFlightID: self.table.nextFlightID())

    let admission: Admission
    var wake: Duration?
    switch action {
    case .serve(let model):
      stripe.hits += 1
      admission = .answered(Answer(.success(model)))

    case .join(let id):
      guard let flight = slot.machine.effects, let ticket = flight.queue.reserve(coalesced: true)
      else {
        preconditionFailure("Internal inconsistency: joining flight \(id) that has no open queue")
      }
      admission = .wait(flight.queue, ticket: ticket)

    case .start(let id, let step):
      let queue = start(id, at: step, key: key, slot: slot, in: stripe, wake: &wake)
      admission = .wait(queue, ticket: queue.reserve()!)

    case .serveAndRefreshAhead(let model, let id, let step):
      // Nobody waits for a refresh ahead: the hit is answered now.
      stripe.hits += 1
      stripe.counters.update { $0.refreshesAhead += 1 }
      _ = start(id, at: step, key: key, slot: slot, in: stripe, wake: &wake, ahead: true)
      admission = .answered(Answer(.success(model)))

    case .failFast(let error):
      stripe.counters.update { $0.failedFast += 1 }
      admission = .answered(Answer(.failure(error)))

    case .serveStale(let model):
      stripe.counters.update { $0.staleServed += 1 }
      admission = .answered(Answer(.success(model)))

    case .retryAfter(let id, let rejecting):
      guard let flight = slot.machine.effects else {
        preconditionFailure("Internal inconsistency: following flight \(id) that is not running")
      }
      let followers = flight.followers ?? WaiterQueue(counters: stripe.counters)
      flight.followers = followers
      admission = .retryAfter(followers, ticket: followers.reserve()!, rejecting: rejecting)

    case .refuse(let error):
      stripe.counters.update { $0.refreshLoopsStopped += 1 }
      broadcaster.emit(.refreshLoopStopped(key: key))
      admission = .answered(Answer(.failure(error)))
    }
    stripe.lock.unlock()

    // Effects, outside the lock.
    if let wake { scheduler.wake(by: wake) }
    if isNew { evictIfNeeded() }
    return admission
  }

  /// Cancels the discarded refreshes' tasks, opening each one's cancellation latch once it was
  /// delivered, and waits until the cancellations of the flights stopped before were delivered:
  /// out of line, so that the flight task's frame, kept for the whole flight, has no room for
  /// the loops.
  @inline(never)
  private static func stop(
    _ discarded: [(work: Task<Void, Never>, cancellation: Latch)], awaiting stopping: [Latch]
  ) async {
    for refresh in discarded {
      refresh.work.cancel()
      refresh.cancellation.open()
    }
    for latch in stopping { await latch.wait() }
  }

  /// Starts flight `id` of `key` at `step`, under the stripe's lock: its queue (no caller in it
  /// yet), its counters, its task, its events.
  private func start(
    _ id: UInt64, at step: KeyMachine.Step, key: AccountKey, slot: AccountSlot, in stripe: Stripe,
    wake: inout Duration?, ahead: Bool = false
  ) -> WaiterQueue {
    let queue = WaiterQueue(counters: stripe.counters) { [weak self] in
      self?.lastWaiterLeft(key, flight: id)
    }
    stripe.counters.update {
      $0.flightsStarted += 1
      $0.flightsInProgress += 1
    }
    let first = prepare(step, key: key, flight: id, in: stripe, wake: &wake)
    let flight = Flight(
      key: key, id: id, queue: queue, lease: lease == nil ? unleased : HeldLease(), first: first)
    let stopped = slot.machine.attach(flight, to: id)
    let stopping = stopped.cancelling.compactMap(\.cancellation)
    // A discarded refresh is cancelled by this flight's task, and recorded as cancelled until
    // then: a flight after this one waits for it too (this one may be stopped before its task
    // ran).
    let discarded = stopped.discarded.compactMap { refresh in
      refresh.work.map { work in
        let cancellation = Latch()
        refresh.cancellation = cancellation
        return (work: work, cancellation: cancellation)
      }
    }
    flight.work = Task { [weak self] in
      // Stopped flights' authorizers are told to stop before this one's starts. A discarded
      // refresh was never cancelled: this is the first cancel, whose handlers run before it
      // returns.
      if !discarded.isEmpty || !stopping.isEmpty {
        await Self.stop(discarded, awaiting: stopping)
      }
      await self?.runFlight(flight)
    }
    // Events are emitted under the lock, so that a key's events are in the order of its
    // decisions (the flight's task may end it on another thread as soon as it is released).
    broadcaster.emit(.flightStarted(key: key, flight: id))
    if ahead { broadcaster.emit(.refreshAheadStarted(key: key, flight: id)) }
    if case .authorize(let reason, _) = step.kind {
      broadcaster.emit(.authorizationStarted(key: key, flight: id, reason: reason))
    }
    return queue
  }
}
