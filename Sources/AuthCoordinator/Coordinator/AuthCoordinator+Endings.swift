import Foundation
import SyncPrimitives

// How flights end: the bookkeeping under the stripe's lock, then the effects outside it. Every
// ending (a result, a deadline, the last waiter leaving, a sign-out) goes through here.
extension AuthCoordinator {
  /// An ending with what carrying it out needs, taken out of the stripe under its lock.
  struct Closing {
    /// A stopped flight's task, to cancel, and the latch to open once it was.
    let work: Task<Void, Never>?
    let cancellation: Latch?
    /// The flight's waiters, and the forced refreshes that waited for it to end.
    let waiters: WaiterQueue.Sealed
    let followers: WaiterQueue.Sealed
    /// An earlier deadline for the scheduler (a stopped refresh's abandonment was armed).
    var wake: Duration?
  }

  /// Closes flight `ending.flight` of `key` under the stripe's lock: counts the ending, seals
  /// the queues of the effects the machine handed back (the callers to resume are taken out,
  /// not resumed) and emits its events, so that a key's events are in the order of its
  /// decisions.
  func close(_ ending: KeyMachine.Ending, key: AccountKey, in stripe: Stripe) -> Closing {
    guard let flight = ending.effects else {
      preconditionFailure("Internal inconsistency: flight \(ending.flight) ended without effects")
    }
    table.flightsEnded.add(1)
    // One update, so that every snapshot balances.
    stripe.counters.update {
      $0.flightsInProgress -= 1
      switch ending.result {
      case .succeeded: $0.flightsSucceeded += 1
      case .failed: $0.flightsFailed += 1
      case .timedOut: $0.flightsTimedOut += 1
      case .cancelled: $0.flightsCancelled += 1
      }
      if ending.storeTimedOut != nil { $0.storeFailures += 1 }
      if ending.refusedByLoopGuard { $0.refreshLoopsStopped += 1 }
      if ending.adoptedFromStore { $0.adoptedFromStore += 1 }
      if ending.cooldown != nil { $0.cooldownsEntered += 1 }
    }

    let outcome: WaiterQueue.Outcome
    switch ending.result {
    case .succeeded(let model): outcome = .success(model)
    case .failed(let error): outcome = ending.stale.map { .success($0) } ?? .failure(error)
    case .timedOut(_, let error): outcome = .failure(error)
    case .cancelled(.lastWaiterLeft): outcome = .failure(CancellationError())
    case .cancelled(.signedOut): outcome = .failure(AuthCoordinatorError.signedOut(key))
    }
    let waiters = flight.queue.seal(outcome)
    if ending.stale != nil, waiters.count > 0 {
      stripe.counters.update { $0.staleServed += waiters.count }
    }
    let followers: WaiterQueue.Sealed
    switch ending.followers {
    case .askAgain: followers = flight.followers?.seal(.retry) ?? WaiterQueue.Sealed()
    case .fail(let error):
      followers = flight.followers?.seal(.failure(error)) ?? WaiterQueue.Sealed()
    }
    emitEvents(of: ending, key: key, served: waiters.count)

    // A stopped refresh goes on: a flight about to spend the same refresh token waits until
    // its task ended (its result stored), for at most the maximum hold (rule 22).
    var wake: Duration?
    if ending.letsRefreshFinish {
      flight.finished = Latch()
      if let at = ending.abandonAt {
        wake = stripe.arm(
          .init(at: at, key: key, flight: ending.flight, phase: .authorization, abandons: true))
      }
    }
    // A stopped flight's work is cancelled after the lock is released (cancellation handlers
    // run synchronously and may reach the coordinator); the machine keeps it recorded, and
    // the key's next flight waits until the cancellation was delivered.
    var work: Task<Void, Never>?
    if ending.stopsWork, let task = flight.work {
      work = task
      flight.cancellation = Latch()
    }
    return Closing(
      work: work, cancellation: flight.cancellation, waiters: waiters, followers: followers,
      wake: wake)
  }

  /// The effects of an ending, outside any lock: a stopped flight's work is cancelled, the
  /// waiters get the result in arrival order, and forced refreshes that waited for the flight
  /// ask again (or fail, after a sign-out).
  func carryOut(_ closing: Closing) {
    if let wake = closing.wake { scheduler.wake(by: wake) }
    closing.work?.cancel()
    closing.cancellation?.open()
    closing.waiters.resume()
    closing.followers.resume()
    evictIfNeeded()
  }

  /// The events of an ending (emitting never runs user code: it only feeds the streams).
  private func emitEvents(of ending: KeyMachine.Ending, key: AccountKey, served: Int) {
    let id = ending.flight
    if let operation = ending.storeTimedOut {
      let error: AuthCoordinatorError
      switch ending.result {
      case .timedOut(_, let timeout): error = timeout
      default:
        error = AuthCoordinatorError(
          .storeFailed, "the token store did not finish the save within \(policy.storeTimeout)")
      }
      broadcaster.emit(.storeFailed(key: key, operation: operation, message: "\(error)"))
    }
    switch ending.result {
    case .succeeded:
      if ending.adoptedFromStore { broadcaster.emit(.adoptedFromStore(key: key, flight: id)) }
      broadcaster.emit(.flightSucceeded(key: key, flight: id, waiters: served))
    case .failed(let error):
      if ending.refusedByLoopGuard { broadcaster.emit(.refreshLoopStopped(key: key)) }
      broadcaster.emit(
        .flightFailed(key: key, flight: id, code: error.code, message: "\(error)"))
      if let duration = ending.cooldown {
        broadcaster.emit(.cooldownEntered(key: key, code: error.code, duration: duration))
      }
      if ending.stale != nil { broadcaster.emit(.staleServed(key: key, flight: id)) }
    case .timedOut(let phase, _):
      broadcaster.emit(.flightTimedOut(key: key, flight: id, phase: phase))
    case .cancelled(let reason):
      broadcaster.emit(.flightCancelled(key: key, flight: id, reason: reason))
    }
  }

  /// Every caller waiting on flight `id` left (called by its queue, outside the queue's lock).
  func lastWaiterLeft(_ key: AccountKey, flight id: UInt64) {
    let stripe = table.stripe(for: key)
    stripe.lock.lock()
    guard let slot = stripe.accounts[key], slot.machine.lastWaiterLeft(id) == .closeQueue,
      let queue = slot.machine.effects?.queue,
      // Atomic with joins, which take this lock too: a caller that joined meanwhile keeps the
      // flight running.
      queue.closeIfIdle(.failure(CancellationError()))
    else {
      stripe.lock.unlock()
      return
    }
    let ending = slot.machine.queueClosed(id)
    let closing = close(ending, key: key, in: stripe)
    stripe.lock.unlock()
    carryOut(closing)
  }

  /// The scheduler fired: every stripe ends the flights whose deadlines passed and asks to be
  /// woken for its next deadline.
  func deadlinesDue() {
    let now = clock.now()
    let date = configuration.now()
    for stripe in table.stripes {
      var closings: [Closing] = []
      // Most of what falls due belongs to flights that already ended: the stripe's epoch moves
      // only for a deadline that can change a machine, so that the threads' replicas of the
      // stripe's models (`HitReplicas`) outlive a deadline that changes nothing.
      stripe.lock.lockToRead()
      var abandoned: [(AccountKey, UInt64, Latch?, Task<Void, Never>?, Latch?)] = []
      for entry in stripe.deadlines.popDue(now: now) {
        guard let slot = stripe.accounts[entry.key],
          slot.machine.hasLiveDeadline(of: entry.flight, abandons: entry.abandons)
        else { continue }
        stripe.lock.markChanged()
        if entry.abandons {
          let stopped = slot.machine.effects(ofStopped: entry.flight)
          guard slot.machine.abandon(entry.flight) else { continue }
          stripe.counters.update { $0.holdsEnded += 1 }
          // Recorded as cancelled now: the key's next flight waits until the cancellation
          // below was delivered (rule 1).
          let cancellation = stopped?.work.map { _ in Latch() }
          stopped?.cancellation = cancellation
          abandoned.append(
            (entry.key, entry.flight, stopped?.finished, stopped?.work, cancellation))
          continue
        }
        guard
          let ending = slot.machine.deadlineReached(
            entry.flight, phase: entry.phase, date: date, at: entry.at)
        else { continue }
        closings.append(close(ending, key: entry.key, in: stripe))
      }
      let next = stripe.deadlines.earliest
      stripe.reportedEarliest = next
      stripe.lock.unlock()
      if let next { scheduler.wake(by: next) }
      for (key, flight, latch, work, cancellation) in abandoned {
        broadcaster.emit(.refreshAbandoned(key: key, flight: flight))
        // Its result will be discarded: its work is cancelled before the flights that waited
        // for it go on (rule 1; the first cancel, whose handlers run before it returns).
        work?.cancel()
        cancellation?.open()
        latch?.open()
      }
      for closing in closings { carryOut(closing) }
    }
  }

  /// Counts and reports a store operation that failed.
  func reportStoreFailure(
    _ key: AccountKey?, _ operation: AuthEvent.StoreOperation, _ error: any Error,
    stripe: Stripe? = nil
  ) {
    let stripe = stripe ?? key.map { table.stripe(for: $0) } ?? table.stripes[0]
    stripe.counters.update { $0.storeFailures += 1 }
    broadcaster.emit(.storeFailed(key: key, operation: operation, message: "\(error)"))
  }
}
