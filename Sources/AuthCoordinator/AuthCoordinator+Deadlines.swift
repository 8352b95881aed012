import Foundation
import SyncPrimitives

// Every flight's deadlines in one min-heap, served by one task sleeping on the injected clock.
extension AuthCoordinator {
  func armDeadline(_ id: UInt64, at deadline: Duration, phase: AuthEvent.FlightPhase) {
    deadlines.insert(.init(at: deadline, flight: id, phase: phase))
    // Entries of ended flights are dropped once they outnumber the live ones.
    if deadlines.count > 2 * flights.count + 64 {
      deadlines.prune { flights[$0] != nil }
    }
    scheduleDeadlineSleeper()
  }

  /// Makes sure one task sleeps until the earliest deadline.
  func scheduleDeadlineSleeper() {
    guard let earliest = deadlines.earliest else {
      deadlineSleeper?.task.cancel()
      deadlineSleeper = nil
      return
    }
    if let sleeper = deadlineSleeper, sleeper.until <= earliest { return }
    deadlineSleeper?.task.cancel()
    sleeperGeneration += 1
    let generation = sleeperGeneration
    let clock = self.clock
    let task = Task { [weak self] in
      do { try await clock.sleepUntil(earliest) } catch { return }
      await self?.deadlinesDue(generation)
    }
    deadlineSleeper = (earliest, generation, task)
  }

  func deadlinesDue(_ generation: UInt64) {
    if deadlineSleeper?.generation == generation { deadlineSleeper = nil }
    for entry in deadlines.popDue(now: clock.now()) {
      deadlineReached(entry.flight, phase: entry.phase)
    }
    scheduleDeadlineSleeper()
  }

  func exchangeBegan(_ id: UInt64, at start: Duration) {
    guard let record = flights[id], let machine = accounts[record.key]?.machine,
      machine.flight?.id == id, case .authorizing = machine.flight?.phase
    else { return }
    armDeadline(
      id, at: clock.deadline(after: configuration.exchangeTimeout, from: start), phase: .exchange)
  }

  func deadlineReached(_ id: UInt64, phase: AuthEvent.FlightPhase) {
    guard let record = flights[id], accounts[record.key] != nil else { return }
    // The authorization deadline no longer applies once the exchange began.
    if phase == .authorization, record.exchangeStarted?.withLock({ $0 }) != nil { return }
    let key = record.key
    switch accounts[key]!.machine.deadlineReached(id, phase: phase, date: configuration.now()) {
    case .ignore:
      return
    case .stop:
      let limit =
        phase == .authorization
        ? configuration.authorizationTimeout : configuration.exchangeTimeout
      stopFlight(
        id, as: .timedOut,
        failing: AuthCoordinatorError.timedOut(
          "the \(phase.rawValue) did not finish within \(limit)"))
      broadcaster.emit(.flightTimedOut(key: key, flight: id, phase: phase))
    case .failLoad:
      let error = AuthCoordinatorError(
        .storeFailed, "the token store did not answer the load within \(storeTimeout)")
      reportStoreFailure(key, .load, error)
      stopFlight(id, as: .timedOut, failing: error)
      broadcaster.emit(.flightTimedOut(key: key, flight: id, phase: phase))
    case .complete(let model):
      // Rule 10: the waiters get the model; the save goes on and its outcome is reported.
      reportStoreFailure(
        key, .save,
        AuthCoordinatorError(
          .storeFailed, "the token store did not finish the save within \(storeTimeout)"))
      syncHotCache(key)
      finishFlight(id, with: .success(model))
    }
  }
}
