import AuthCoordinator
import Foundation

/// One simulated process's view of the shared ``InMemoryAuthorizationLease`` (the real one:
/// fences, sign-out generations, back-offs, change notices, expiries on the world's clock, and
/// its history's pruning and compaction, with bounds small enough to happen within a seed), with
/// the process's pauses and failed renewals; it tells the ledger who holds which key until when,
/// which back-offs were recorded and which sign-outs made, and checks that no back-off recorded
/// before a sign-out of its account is answered after it.
struct FleetLease: AuthorizationLease {
  struct RenewalFault: Error, CustomStringConvertible {
    var description: String { "simulated renewal failure (the lease's storage)" }
  }

  let inner: InMemoryAuthorizationLease
  let process: FleetProcessState
  let clock: VirtualClock
  let ledger: FleetLedger

  struct CallFault: Error, CustomStringConvertible {
    var description: String { "simulated lease failure (the lease could not be read)" }
  }

  func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws -> LeaseAttempt {
    ledger.began(.leaseAcquisition, key.account, process: process.index)
    defer { ledger.ended(.leaseAcquisition, key.account, process: process.index) }
    await process.gate(clock)
    await process.maybeHang("lease acquire", clock: clock, ledger: ledger)
    if process.fails("lease acquire", rate: \.failedLeaseCalls, ledger: ledger) {
      throw CallFault()
    }
    let asked = ledger.mark()
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    // Taken once the lease answered: the call into the lease may hop executors, so work of
    // other tasks can run between `asked` and the lease's own step, never after this one.
    let answered = ledger.mark()
    if case .acquired(let grant) = attempt {
      ledger.granted(key, asked: asked, answered: answered, fence: grant.fence)
      ledger.held(key, process: process.index, fence: grant.fence, expiresAt: grant.expiresAt)
      ledger.note("p\(process.index) took \(key.account)'s lease (fence \(grant.fence))")
      await process.maybePause(at: "acquire", clock: clock, ledger: ledger)
    } else if case .backingOff(let until, _, _) = attempt {
      ledger.backOffAnswered(key, until: until, process: process.index, asked: asked)
    }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    ledger.began(.leaseRenewal, grant.key.account, process: process.index)
    defer { ledger.ended(.leaseRenewal, grant.key.account, process: process.index) }
    await process.gate(clock)
    let rate = process.faults.failedRenewals
    if process.draw({ $0.chance(rate) }) {
      ledger.count("fault: renewal failed")
      throw RenewalFault()
    }
    await process.maybePause(at: "renewal", clock: clock, ledger: ledger)
    await process.maybeHang("lease renewal", clock: clock, ledger: ledger)
    let renewed = await inner.renew(grant, timeToLive: timeToLive)
    if let renewed {
      ledger.held(
        renewed.key, process: process.index, fence: renewed.fence, expiresAt: renewed.expiresAt)
    } else {
      ledger.note("p\(process.index) lost \(grant.key.account)'s lease (fence \(grant.fence))")
    }
    return renewed
  }

  func release(_ grant: LeaseGrant) async {
    ledger.began(.leaseRelease, grant.key.account, process: process.index)
    defer { ledger.ended(.leaseRelease, grant.key.account, process: process.index) }
    await process.gate(clock)
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant)
  }

  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async {
    ledger.began(.leaseRelease, grant.key.account, process: process.index)
    defer { ledger.ended(.leaseRelease, grant.key.account, process: process.index) }
    await process.gate(clock)
    ledger.released(grant.key, fence: grant.fence)
    // The expiry the lease gives it (its clock is the world's): how the ledger knows it again.
    let until = ledger.date.addingTimeInterval(backOff.clamped.duration.seconds)
    await inner.release(grant, backingOff: backOff)
    // Recorded only by the key's holder: a deposed one's back-off is refused.
    if inner.backOffEnd(for: grant.key) == until {
      ledger.backOffRecorded(grant.key, until: until)
    } else {
      ledger.count("phase: back-off refused (the grant was no longer held)")
    }
  }

  func signOut(account: String, by owner: String) async {
    await process.gate(clock)
    let began = ledger.mark()
    await inner.signOut(account: account, by: owner)
    ledger.leaseSignedOut(account, began: began, by: process.index)
    ledger.signOutAnnounced(account, by: process.index)
  }

  func signOutAll(by owner: String) async {
    await process.gate(clock)
    let began = ledger.mark()
    await inner.signOutAll(by: owner)
    ledger.leaseSignedOut(nil, began: began, by: process.index)
  }

  func revokeGrants(ofAccount account: String) async throws {
    _ = try await revokeGrantsReportingFence(ofAccount: account)
  }

  func revokeAllGrants() async {
    _ = await revokeAllGrantsReportingFence()
  }

  /// A logout's revocation fails at the seed's rate of failed lease calls, before it reaches
  /// the lease: the lease's storage is unreachable, and grants taken before the logout stay
  /// current. (An undo's revocation does not fail here.)
  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    await process.gate(clock)
    if ledger.isLogoutRevocation(account, by: process.index),
      process.fails("logout's revocation", rate: \.failedLeaseCalls, ledger: ledger)
    {
      ledger.logoutRevocationFailed(account, by: process.index)
      throw CallFault()
    }
    let began = ledger.mark()
    let fence = await inner.revokeGrantsReportingFence(ofAccount: account)
    ledger.leaseSignedOut(account, began: began, by: process.index)
    return fence
  }

  func revokeAllGrantsReportingFence() async -> UInt64? {
    await process.gate(clock)
    let began = ledger.mark()
    let fence = await inner.revokeAllGrantsReportingFence()
    ledger.leaseSignedOut(nil, began: began, by: process.index)
    return fence
  }

  func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    ledger.began(.grantCheck, grant.key.account, process: process.index)
    defer { ledger.ended(.grantCheck, grant.key.account, process: process.index) }
    await process.gate(clock)
    await process.maybeHang("grant check", clock: clock, ledger: ledger)
    if process.fails("grant check", rate: \.failedLeaseCalls, ledger: ledger) {
      ledger.saveInDoubt(grant.key, process: process.index)
      throw CallFault()
    }
    let asked = ledger.mark()
    let current = await inner.isCurrent(grant)
    ledger.leaseAnswered(grant, current: current, asked: asked)
    ledger.grantChecked(grant.key, process: process.index, current: current)
    if !current {
      ledger.note(
        "p\(process.index)'s grant of \(grant.key.account) (fence \(grant.fence)) is not current")
    }
    return current
  }

  /// The shared lease's notices, each reaching this process up to the seed's notice delay
  /// late, in order (a notice is never delivered before an earlier one): what the file and
  /// PostgreSQL leases do, whose notices wait for a watcher's read, a `NOTIFY` or a poll.
  func changes() -> AsyncStream<LeaseChange> {
    let upstream = inner.changes()
    guard process.noticeDelay() != nil else { return upstream }
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream()
    let (timed, timedContinuation) = AsyncStream<(LeaseChange, Duration)>.makeStream()
    let (process, world, ledger) = (process, clock.world, ledger)
    // Stamps each notice with its delivery time as it arrives...
    let stamping = Task {
      var last = Duration.zero
      for await change in upstream {
        let delay = process.noticeDelay() ?? .zero
        last = max(last, world.now + delay)
        if delay > .zero { ledger.count("fault: lease notice late") }
        timedContinuation.yield((change, last))
      }
      timedContinuation.finish()
    }
    // ... and delivers it then.
    let delivering = Task {
      for await (change, at) in timed {
        try? await world.sleep(until: at)
        if Task.isCancelled { break }
        continuation.yield(change)
      }
      continuation.finish()
    }
    continuation.onTermination = { _ in
      stamping.cancel()
      delivering.cancel()
    }
    return stream
  }
}
