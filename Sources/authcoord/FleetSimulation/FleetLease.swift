import AuthCoordinator
import Foundation

/// One simulated process's view of the shared ``InMemoryAuthorizationLease`` (the real one:
/// fences, sign-out generations, back-offs, change notices, expiries on the world's clock), with
/// the process's pauses and failed renewals; it tells the ledger who holds which key until when.
struct FleetLease: AuthorizationLease {
  struct RenewalFault: Error, CustomStringConvertible {
    var description: String { "simulated renewal failure (the lease's storage)" }
  }

  let inner: InMemoryAuthorizationLease
  let process: FleetProcessState
  let clock: VirtualClock
  let ledger: FleetLedger

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async -> LeaseAttempt {
    await process.gate(clock)
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    if case .acquired(let grant) = attempt {
      ledger.held(key, process: process.index, fence: grant.fence, expiresAt: grant.expiresAt)
      ledger.note("p\(process.index) took \(key.account)'s lease (fence \(grant.fence))")
      await process.maybePause(at: "acquire", clock: clock, ledger: ledger)
    }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    await process.gate(clock)
    let rate = process.faults.failedRenewals
    if process.draw({ $0.chance(rate) }) {
      ledger.count("fault: renewal failed")
      throw RenewalFault()
    }
    await process.maybePause(at: "renewal", clock: clock, ledger: ledger)
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
    await process.gate(clock)
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant)
  }

  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async {
    await process.gate(clock)
    ledger.released(grant.key, fence: grant.fence)
    await inner.release(grant, backingOff: backOff)
  }

  func signOut(account: String, by owner: String) async {
    await process.gate(clock)
    await inner.signOut(account: account, by: owner)
  }

  func signOutAll(by owner: String) async {
    await process.gate(clock)
    await inner.signOutAll(by: owner)
  }

  func revokeGrants(ofAccount account: String) async {
    await process.gate(clock)
    await inner.revokeGrants(ofAccount: account)
  }

  func revokeAllGrants() async {
    await process.gate(clock)
    await inner.revokeAllGrants()
  }

  func isCurrent(_ grant: LeaseGrant) async -> Bool {
    await process.gate(clock)
    return await inner.isCurrent(grant)
  }

  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
