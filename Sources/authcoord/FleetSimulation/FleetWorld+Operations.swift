import AuthCoordinator
import Foundation

// What the simulated callers do to the fleet: ask, force a refresh, cancel, log out, and the
// faults drawn between them; and what the world checks when a call ends.
extension FleetWorld {
  /// One step of the run: an outage may begin, then one operation or fault drawn from the
  /// seed's stream.
  func perform() {
    if faults.outages > 0, rng.chance(faults.outages) {
      let length = Duration.seconds(Int.random(in: 5...40, using: &rng))
      ledger.count("fault: outage")
      ledger.note("the token server is down for \(length)")
      outage.begin(at: clock.world.now, for: length)
    }
    let process = Int.random(in: 0..<processes.count, using: &rng)
    let user = users[Int.random(in: 0..<users.count, using: &rng)]
    switch Int.random(in: 0..<100, using: &rng) {
    case ..<30:
      let timeout: Duration? =
        rng.chance(25) ? .milliseconds(Int.random(in: 500...8_000, using: &rng)) : nil
      call(process, user, .ifNeeded, timeout: timeout)
    case ..<45:
      ledger.count("operation: burst")
      for _ in 0..<Int.random(in: 3...8, using: &rng) {
        call(Int.random(in: 0..<processes.count, using: &rng), user, .ifNeeded, timeout: nil)
      }
    case ..<60:
      let seen = lock.withLock { lastSeen[process]?[user] }
      call(process, user, .force(rejecting: seen), timeout: nil)
    case ..<68:
      let outstanding = lock.withLock { calls.keys.sorted() }
      guard
        let id = outstanding.isEmpty
          ? nil : outstanding[Int.random(in: 0..<outstanding.count, using: &rng)],
        let task = lock.withLock({ calls[id]?.task })
      else { return }
      ledger.count("operation: cancel")
      ledger.note("cancel call #\(id)")
      task.cancel()
    case ..<73:
      logout(process, user)
    case ..<83:
      let length = timeToLive * Double.random(in: 0.4...2.0, using: &rng)
      ledger.count("fault: pause")
      if length > timeToLive { ledger.count("fault: pause past the TTL") }
      // Most often the process holding a lease (mid-flight), else any.
      let holders = users.compactMap { ledger.holder(of: $0) }
      let target =
        !holders.isEmpty && rng.chance(70)
        ? holders[Int.random(in: 0..<holders.count, using: &rng)] : process
      ledger.note("p\(target) paused for \(length)")
      processes[target].state.pause(from: clock.world.now, for: length)
    case ..<86:
      let step = Double.random(in: -2...2, using: &rng)
      ledger.count("fault: wall clock step")
      ledger.note("p\(process)'s wall clock steps \(String(format: "%+.2f", step)) s")
      processes[process].state.stepWallClock(by: step)
    default:
      if crashRate > 0, crashes.chance(crashRate * 100 / 14) { crash(process) }
    }
  }

  /// A logout of `user`, or, aimed at a phase, of a user one of whose processes reads the
  /// store or has a token request out, whose key backs off (a failure recorded at the lease),
  /// whose lease is held (a flight under way), or one of whose processes retries a save or has
  /// a write in doubt (a save or a grant check failed).
  private func logout(_ process: Int, _ user: AccountKey) {
    var user = user
    var process = process
    let backingOff = users.filter { ledger.isBackingOff($0) }
    let holding = users.filter { ledger.holder(of: $0) != nil }
    let retrying = aimsAtSaves ? users.filter { ledger.saver(retrying: $0) != nil } : []
    let busy =
      aimsAtPhases
      ? FleetLedger.Phase.allCases.flatMap { phase in
        users.flatMap { user in
          ledger.processes(in: phase, for: user).map { (phase, user, $0) }
        }
      } : []
    if !busy.isEmpty, phaseAims.chance(50) {
      let (phase, aimed, busyProcess) = busy[Int.random(in: 0..<busy.count, using: &phaseAims)]
      user = aimed
      ledger.count("operation: logout aimed at \(phase.rawValue)")
      // Half from the process reading or requesting (a local logout during its own step),
      // half from another, which it then hears of only by the lease.
      process =
        phaseAims.chance(50) ? busyProcess : (busyProcess + 1) % processes.count
    } else if !retrying.isEmpty, aims.chance(50) {
      user = retrying[Int.random(in: 0..<retrying.count, using: &aims)]
      ledger.count("operation: logout aimed at a save retry")
      // From another process than the saver's, which then hears of it only by the lease.
      if let saver = ledger.saver(retrying: user), saver == process {
        process = (process + 1) % processes.count
      }
    } else if !backingOff.isEmpty, rng.chance(50) {
      user = backingOff[Int.random(in: 0..<backingOff.count, using: &rng)]
      ledger.count("operation: logout aimed at a back-off")
    } else if !holding.isEmpty, rng.chance(70) {
      user = holding[Int.random(in: 0..<holding.count, using: &rng)]
      ledger.count("operation: logout aimed at a flight")
      // From another process than the holder's, which then hears of it only by the lease.
      if let holder = ledger.holder(of: user), holder == process {
        process = (process + 1) % processes.count
      }
      if rng.chance(75) {
        // Stopped between its removal and its announcement: until then the holder's check of
        // its grant is all that keeps its late result out of the store.
        let length = timeToLive * Double.random(in: 0.5...2.0, using: &rng)
        ledger.count("fault: logout stopped before its announcement")
        processes[process].state.pauseAfterNextRemoval(for: length)
      }
    }
    ledger.count("operation: logout")
    ledger.note("p\(process) logs \(user.account) out")
    let coordinator = processes[process].coordinator
    let log = ledger
    let index = log.logoutStarted(user.account, by: process)
    let spelling = spelled(user).account
    Task {
      await coordinator.accountStatusChanged(.logout(account: spelling))
      log.logoutReturned(index)
      log.note("p\(process)'s logout of \(user.account) returned")
    }
  }

  private func call(
    _ process: Int, _ user: AccountKey, _ refresh: RefreshPolicy, timeout: Duration?
  ) {
    let kind: String
    var rejected: String?
    switch refresh {
    case .ifNeeded: kind = timeout == nil ? "ask" : "ask (timeout \(timeout!))"
    case .force(let token):
      kind = "force"
      rejected = token
    }
    ledger.count("operation: \(kind.hasPrefix("ask (") ? "ask with a timeout" : kind)")
    let bound = timeout ?? (authorizationTimeout + storeTimeout * 3) * 3
    let id = lock.withLock { () -> Int in
      nextCall += 1
      calls[nextCall] = Call(
        id: nextCall, process: process, user: user, kind: kind, started: clock.world.now,
        bound: bound, rejected: rejected)
      return nextCall
    }
    let coordinator = processes[process].coordinator
    let state = processes[process].state
    let base = baseDate
    let world = clock.world
    let key = spelled(user)
    let task = Task { [self] in
      let result: Result<AuthModel, any Error>
      do {
        result = .success(
          try await coordinator.authModel(for: key, refresh: refresh, timeout: timeout))
      } catch {
        result = .failure(error)
      }
      let date = base.addingTimeInterval(world.now.seconds + state.wallClockOffset)
      finished(id, result, date: date)
    }
    lock.withLock { calls[id]?.task = task }
  }

  private func finished(_ id: Int, _ result: Result<AuthModel, any Error>, date: Date) {
    guard let call = lock.withLock({ calls.removeValue(forKey: id) }) else {
      // A call of a crashed process: the run's end woke it; nobody heard.
      if lock.withLock({ crashedCalls.contains(id) }) { return }
      ledger.violation("resumed twice", "call #\(id) ended a second time")
      return
    }
    let elapsed = clock.world.now - call.started
    let name = "call #\(id) (p\(call.process) \(call.user.account) \(call.kind))"
    lock.withLock { worstInBounds = max(worstInBounds, elapsed / call.bound) }
    if elapsed > call.bound + .milliseconds(1) {
      ledger.violation("late", "\(name) ended after \(elapsed), past its bound \(call.bound)")
    }
    switch result {
    case .success(let model):
      ledger.count("outcome: served")
      ledger.note("\(name) served \(model.accessToken)")
      if let expiresAt = model.expiresAt, expiresAt <= date {
        ledger.violation("expired served", "\(name) was served \(model.accessToken), expired")
      }
      if let rejected = call.rejected, rejected == model.accessToken {
        ledger.violation("rejected served", "\(name) was served the token it rejected")
      }
      switch ledger.signedOutSession(
        call.user, access: model.accessToken, started: call.started, process: call.process)
      {
      case nil: break
      case .inTheUndoWindow:
        // A late save after the logout, its saver paused before it could undo it: the store
        // held the signed-out session for the pause. Counted apart, as the gap at the send.
        ledger.count("signed-out session served in the undo window")
      case .afterAnUndoDiedInACrash:
        ledger.count("signed-out session served after its undo died in a crash (open gap)")
        ledger.note(
          "\(name) was served \(model.accessToken), stored by a late save whose undo died in a crash"
        )
      case .resumedDuringTheLogout:
        // The open race: see ``FleetLedger/SignedOutServing/resumedDuringTheLogout``.
        ledger.count("signed-out session resumed during a stopped logout (open race)")
        ledger.note(
          "\(name) was served \(model.accessToken) of a session resumed during its logout")
      case .afterAFailedRevocation:
        ledger.count("signed-out session served after a logout whose revocation failed (rule 19)")
      case .afterLogout(let logout):
        ledger.violation(
          "signed-out session served",
          "\(name), started at \(call.started), was served \(model.accessToken), of a family "
            + "born before \(call.user.account)'s logout at \(logout.started), which had ended")
      }
      lock.withLock { lastSeen[call.process, default: [:]][call.user] = model.accessToken }
    case .failure(let error):
      let code =
        (error as? AuthCoordinatorError)?.code.rawValue
        ?? (error is CancellationError ? "cancelled" : "\(type(of: error))")
      ledger.count("outcome: \(code)")
      ledger.note("\(name) failed: \(code)")
    }
  }
}
