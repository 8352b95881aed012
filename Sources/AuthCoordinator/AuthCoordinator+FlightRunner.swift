import Foundation
import SyncPrimitives

// A flight's one task and the events it reports: load, authorize, persist, and how it ends.
extension AuthCoordinator {
  /// The next effect of a flight: decided on the actor, carried out by the flight's task.
  enum FlightStep: Sendable {
    /// Read the store (cold start), in the key's store order.
    case load(StoreTurn)
    /// Call the authorizer.
    case authorize(AuthorizationRequest)
    /// Write the new model, in the key's store order, before the waiters resume.
    case persist(AuthModel, StoreTurn)
  }

  /// The flight's one task: carries out each step and asks the actor for the next. A step's
  /// report names the flight, so a flight that was stopped meanwhile gets no next step and
  /// whatever it produced is discarded.
  nonisolated func runFlight(_ key: AccountKey, flight id: UInt64, first: FlightStep) async {
    var next: FlightStep? = first
    while let step = next {
      switch step {
      case .load(let turn):
        await turn.waitForTurn()
        let result: Result<AuthModel?, any Error>
        do { result = .success(try await store.model(for: key)) } catch { result = .failure(error) }
        turn.done.open()
        next = await storeLoaded(key, flight: id, result: result)
      case .authorize(let request):
        let result: Result<AuthModel, AuthCoordinatorError>
        do {
          let model = try await authorizer.authorize(request)
          result =
            model.mcUid == key.mcUid
            ? .success(model)
            : .failure(
              AuthCoordinatorError(
                .authorizationFailed, "the authorizer returned a model for another user"))
        } catch {
          result = .failure(Self.wrap(error))
        }
        next = await authorizationFinished(key, flight: id, result: result)
      case .persist(let model, let turn):
        await turn.waitForTurn()
        var failure: (any Error)?
        do { try await store.save(model, for: key) } catch { failure = error }
        turn.done.open()
        await persisted(id, key: key, saveFailure: failure)
        next = nil
      }
    }
  }

  func storeLoaded(
    _ key: AccountKey, flight id: UInt64, result: Result<AuthModel?, any Error>
  ) -> FlightStep? {
    var loaded: AuthModel?
    switch result {
    case .success(let model):
      // A model stored for another user is never handed out, nor one a failed logout left.
      loaded = model.flatMap { $0.mcUid == key.mcUid ? $0 : nil }
      if loaded != nil, unremoved.covers(key.mcUid) { loaded = nil }
    case .failure(let error):
      reportStoreFailure(key, .load, error)
    }
    guard accounts[key] != nil else { return nil }
    let action = accounts[key]!.machine.loaded(
      id, model: loaded, date: configuration.now(), now: clock.now())
    syncHotCache(key)
    switch action {
    case .discard:
      return nil
    case .complete(let model):
      finishFlight(id, with: .success(model))
      return nil
    case .authorize(let reason):
      return beginAuthorization(key, flight: id, reason: reason)
    case .fail(let code):
      counters.update { $0.refreshLoopsStopped += 1 }
      broadcaster.emit(.refreshLoopStopped(key: key))
      finishFlight(
        id, with: .failure(AuthCoordinatorError(code, "refresh loop stopped for \(key)")))
      return nil
    }
  }

  /// Prepares the authorizer call of flight `id`: its request, its deadline, its counters.
  func beginAuthorization(
    _ key: AccountKey, flight id: UInt64, reason: AuthorizationReason
  ) -> FlightStep {
    let exchangeStarted = LockedState<Duration?>(nil)
    let clock = self.clock
    let signal = ExchangeSignal { [weak self] in
      let now = clock.now()
      exchangeStarted.withLock { $0 = now }
      Task { await self?.exchangeBegan(id, at: now) }
    }
    let request = AuthorizationRequest(
      key: key, reason: reason, requestID: UUID().uuidString, exchangeSignal: signal)
    flights[id]?.exchangeStarted = exchangeStarted
    counters.update { $0.authorizationsStarted += 1 }
    broadcaster.emit(.authorizationStarted(key: key, flight: id, reason: reason))
    armDeadline(
      id, at: clock.deadline(after: configuration.authorizationTimeout), phase: .authorization)
    return .authorize(request)
  }

  func authorizationFinished(
    _ key: AccountKey, flight id: UInt64, result: Result<AuthModel, AuthCoordinatorError>
  ) -> FlightStep? {
    guard flights[id] != nil, accounts[key] != nil else {
      // The flight was stopped (timed out, abandoned, signed out) before its result came.
      counters.update { $0.lateResultsDiscarded += 1 }
      broadcaster.emit(.lateResultDiscarded(key: key, flight: id))
      return nil
    }
    switch accounts[key]!.machine.authorized(id, result: result) {
    case .discard:
      counters.update { $0.lateResultsDiscarded += 1 }
      broadcaster.emit(.lateResultDiscarded(key: key, flight: id))
      return nil
    case .persist(let model):
      armDeadline(id, at: clock.deadline(after: storeTimeout), phase: .save)
      return .persist(model, storeOperations.reserve(key))
    case .fail:
      guard case .failure(let error) = result else { return nil }
      finishFlight(id, with: .failure(error))
      return nil
    }
  }

  func persisted(_ id: UInt64, key: AccountKey, saveFailure: (any Error)?) {
    if let saveFailure { reportStoreFailure(key, .save, saveFailure) }
    guard let record = flights[id], accounts[record.key] != nil else { return }
    switch accounts[record.key]!.machine.persisted(id, date: configuration.now()) {
    case .discard:
      break
    case .complete(let model):
      syncHotCache(record.key)
      finishFlight(id, with: .success(model))
    }
  }

  func lastWaiterLeft(_ id: UInt64) {
    guard let record = flights[id],
      accounts[record.key]?.machine.lastWaiterLeft(
        id, closeQueue: { record.queue.closeIfIdle(.failure(CancellationError())) }) == .stop
    else { return }
    stopFlight(id, as: .cancelled, failing: CancellationError())
    broadcaster.emit(.flightCancelled(key: record.key, flight: id, reason: .lastWaiterLeft))
  }

  func signOutInMemory(_ key: AccountKey) {
    hot.remove(key)
    guard let id = accounts[key]?.machine.signOut() else { return }
    stopFlight(id, as: .cancelled, failing: AuthCoordinatorError.signedOut(key))
    broadcaster.emit(.flightCancelled(key: key, flight: id, reason: .signedOut))
  }

  // MARK: - Effects

  /// Ends a flight that produced a result: the waiters get it, forced refreshes that waited
  /// for the flight ask again.
  func finishFlight(_ id: UInt64, with result: Result<AuthModel, AuthCoordinatorError>) {
    guard let record = flights.removeValue(forKey: id) else { return }
    hot.setFlight(nil, for: record.key)
    let served: Int
    switch result {
    case .success(let model):
      served = record.queue.finish(.success(model))
      counters.update {
        $0.flightsSucceeded += 1
        $0.flightsInProgress -= 1
      }
      broadcaster.emit(.flightSucceeded(key: record.key, flight: id, waiters: served))
    case .failure(let error):
      record.queue.finish(.failure(error))
      counters.update {
        $0.flightsFailed += 1
        $0.flightsInProgress -= 1
      }
      broadcaster.emit(.flightFailed(key: record.key, flight: id, code: error.code))
    }
    record.followers?.finish(.retry)
    evictIfNeeded()
  }

  /// How a stopped flight is counted.
  enum StopKind {
    case cancelled
    case timedOut
  }

  /// Ends a flight that will never produce a result (timed out, cancelled, signed out): its work
  /// is cancelled and anything it returns later is discarded.
  func stopFlight(_ id: UInt64, as kind: StopKind, failing error: any Error) {
    guard let record = flights.removeValue(forKey: id) else { return }
    hot.setFlight(nil, for: record.key)
    // One update, so that every snapshot balances (the authorizer's cancellation handler below
    // may read the statistics).
    counters.update {
      $0.flightsInProgress -= 1
      switch kind {
      case .cancelled: $0.flightsCancelled += 1
      case .timedOut: $0.flightsTimedOut += 1
      }
    }
    record.work?.cancel()
    record.queue.finish(.failure(error))
    // Forced refreshes waiting for this flight ask again, unless the account signed out.
    let signedOut = (error as? AuthCoordinatorError)?.code == .signedOut
    record.followers?.finish(signedOut ? .failure(error) : .retry)
    evictIfNeeded()
  }
}
