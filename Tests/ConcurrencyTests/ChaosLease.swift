import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// An ``InMemoryAuthorizationLease`` behind a SIMULATED unreliable connection, for the stress
/// (`STRESS_LEASE_FAULTS=p`): a share of every kind of call throws, some before the lease saw
/// it and some after (the answer lost: a grant taken, a renewal or release made, that the
/// coordinator never hears of), and a share of them wait on the run's clock first, up to 20 s,
/// past the lease's 15 s time to live. Sign-outs and revocations fail only before they reach
/// the lease.
final class ChaosLease: AuthorizationLease, @unchecked Sendable {
  struct Failure: Error, CustomStringConvertible {
    var description: String { "simulated lease failure (the connection dropped)" }
  }

  /// Where a failure strikes.
  private enum Strike { case none, before, after }

  private struct State {
    var rng: SplitMix64
    var failures: [String: Int] = [:]
    var slow = 0
  }

  let inner: InMemoryAuthorizationLease
  let percent: Double
  let clock: ManualClock
  static let longestWait = 20
  private let state: LockedState<State>

  init(_ inner: InMemoryAuthorizationLease, percent: Double, clock: ManualClock, seed: UInt64) {
    self.inner = inner
    self.percent = percent
    self.clock = clock
    state = LockedState(State(rng: SplitMix64(seed: seed)))
  }

  /// Failures injected, by the call and where they struck.
  var failures: [String: Int] { state.withLock { $0.failures } }
  /// Calls that waited on the clock first.
  var slowCalls: Int { state.withLock { $0.slow } }

  /// Waits on the clock for a share of the calls, then draws whether the call fails.
  private func draw(_ call: String, after allowed: Bool = true) async -> Strike {
    let (wait, strike) = state.withLock { state -> (Duration?, Strike) in
      var wait: Duration?
      if state.rng.chance(percent) {
        state.slow += 1
        wait = .seconds(Int.random(in: 1...Self.longestWait, using: &state.rng))
      }
      guard state.rng.chance(percent) else { return (wait, .none) }
      let strike: Strike = allowed && state.rng.chance(50) ? .after : .before
      state.failures["\(call) \(strike == .after ? "answer lost" : "failed")", default: 0] += 1
      return (wait, strike)
    }
    if let wait { try? await clock.sleep(for: wait) }
    return strike
  }

  func acquire(
    _ key: AccountKey, owner: String, timeToLive: Duration
  ) async throws -> LeaseAttempt {
    let strike = await draw("acquire")
    if strike == .before { throw Failure() }
    let attempt = await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    StressTimeline.shared.note(
      key.account, "lease: acquire \(attempt)\(strike == .after ? " (answer lost)" : "")")
    if strike == .after { throw Failure() }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    let strike = await draw("renew")
    if strike == .before { throw Failure() }
    let renewed = await inner.renew(grant, timeToLive: timeToLive)
    if renewed == nil { StressTimeline.shared.note(grant.key.account, "lease: renew refused") }
    if strike == .after { throw Failure() }
    return renewed
  }

  func release(_ grant: LeaseGrant) async throws {
    let strike = await draw("release")
    if strike == .before { throw Failure() }
    await inner.release(grant)
    if strike == .after { throw Failure() }
  }

  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws {
    let strike = await draw("release backing off")
    if strike == .before { throw Failure() }
    await inner.release(grant, backingOff: backOff)
    if strike == .after { throw Failure() }
  }

  func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    if await draw("isCurrent", after: false) != .none {
      StressTimeline.shared.note(grant.key.account, "lease: isCurrent failed")
      throw Failure()
    }
    let current = await inner.isCurrent(grant)
    StressTimeline.shared.note(
      grant.key.account, "lease: isCurrent \(current) (fence \(grant.fence))")
    return current
  }

  func revokeGrants(ofAccount account: String) async throws {
    if await draw("revoke", after: false) != .none { throw Failure() }
    await inner.revokeGrants(ofAccount: account)
  }

  func revokeAllGrants() async throws {
    if await draw("revoke all", after: false) != .none { throw Failure() }
    await inner.revokeAllGrants()
  }

  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    if await draw("revoke", after: false) != .none {
      StressTimeline.shared.note(account, "lease: revoke failed")
      throw Failure()
    }
    StressTimeline.shared.note(account, "lease: revoke")
    return await inner.revokeGrantsReportingFence(ofAccount: account)
  }

  func revokeAllGrantsReportingFence() async throws -> UInt64? {
    if await draw("revoke all", after: false) != .none { throw Failure() }
    return await inner.revokeAllGrantsReportingFence()
  }

  func signOut(account: String, by owner: String) async throws {
    if await draw("sign-out", after: false) != .none { throw Failure() }
    await inner.signOut(account: account, by: owner)
  }

  func signOutAll(by owner: String) async throws {
    if await draw("sign-out all", after: false) != .none { throw Failure() }
    await inner.signOutAll(by: owner)
  }

  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}
