import Foundation
import SyncPrimitives

// A request admitted on the actor: the state machine decides, the actor carries it out.
extension AuthCoordinator {
  // MARK: - Decisions carried out (actor side)

  @inline(never)  // its temporaries would otherwise land in the parked caller's async frame
  func admit(_ key: AccountKey, refresh: RefreshPolicy) throws -> Admission {
    // A caller cancelled before it arrives never joins or starts a flight.
    try Task.checkCancellation()
    let isNew = accounts[key] == nil
    let tick = hot.nextTick()
    let action = accounts[key, default: Account(machine: .init(policy: policy), lastUsed: tick)]
      .machine.request(
        refresh, date: configuration.now(), now: clock.now(), newFlightID: nextFlightID)
    accounts[key]!.lastUsed = tick
    defer {
      if isNew {
        evictIfNeeded()
        counters.update { $0.keysInMemory = accounts.count }
      }
    }

    switch action {
    case .serve(let model):
      counters.update { $0.cacheHits += 1 }
      return .answered(Answer(.success(model)))

    case .join(let id):
      guard let record = flights[id], let ticket = record.queue.reserve() else {
        preconditionFailure("Internal inconsistency: joining flight \(id) that has no open queue")
      }
      counters.update { $0.coalescedCallers += 1 }
      return .wait(record.queue, ticket: ticket)

    case .start(let id, let step):
      nextFlightID += 1
      let queue = WaiterQueue(counters: counters) { [weak self] in
        Task { await self?.lastWaiterLeft(id) }
      }
      let ticket = queue.reserve()!
      flights[id] = FlightRecord(key: key, queue: queue)
      hot.setFlight(queue, for: key)
      counters.update {
        $0.flightsStarted += 1
        $0.flightsInProgress += 1
      }
      broadcaster.emit(.flightStarted(key: key, flight: id))
      let first: FlightStep
      switch step {
      case .load:
        first = .load(storeOperations.reserve(key))
        armDeadline(id, at: clock.deadline(after: storeTimeout), phase: .load)
      case .authorize(let reason): first = beginAuthorization(key, flight: id, reason: reason)
      }
      flights[id]?.work = Task { [weak self] in await self?.runFlight(key, flight: id, first: first)
      }
      return .wait(queue, ticket: ticket)

    case .retryAfter(let id, let rejecting):
      guard var record = flights[id] else {
        preconditionFailure("Internal inconsistency: following flight \(id) that is not running")
      }
      let followers = record.followers ?? WaiterQueue(counters: counters)
      record.followers = followers
      flights[id] = record
      return .retryAfter(followers, ticket: followers.reserve()!, rejecting: rejecting)

    case .refuse(let code):
      counters.update { $0.refreshLoopsStopped += 1 }
      broadcaster.emit(.refreshLoopStopped(key: key))
      return .answered(
        Answer(
          .failure(
            AuthCoordinatorError(
              code,
              "more than \(policy.maxForcedAuthorizations) forced refreshes (or renewals of "
                + "tokens shorter than the refresh leeway) of \(key) within "
                + "\(configuration.loopWindow); not bouncing the user to Alipay again"))))
    }
  }
}
