import Foundation
import Testing

@testable import AuthCoordinator

/// A fleet's back-off through the lease (issue 24, "per fleet, with a lease"), on the machine
/// alone: a flight whose authorizer failed gives the lease back with the failure the key
/// remembers, and a flight that finds the lease backing off ends without authorizing, its key
/// remembering the failure for as long, its next back-off growing from the other process's.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineLeaseBackOffTests: StateMachineFixture {
  let networkError = AuthCoordinatorError(.networkError, "down")
  let revoked = AuthCoordinatorError(.authorizationFailed, "revoked", transient: false)

  /// A silent policy with the lease, one attempt per flight, jitter pinned by the machine.
  func fleetPolicy(servesStale: Bool = false, interactive: Bool = false) -> Machine.Policy {
    var policy = self.policy(usesLease: true)
    policy.interactiveAuthorizer = interactive
    var silent = SilentRefreshPolicy(refreshAhead: nil, maxAttempts: 1)
    silent.servesStaleOnError = servesStale
    policy.silent = silent
    return policy
  }

  /// Flight `id` of `machine`, holding the lease, calling its authorizer at `now`.
  func authorizingWithTheLease(
    _ machine: inout Machine, flight id: UInt64 = 1, stored: AuthModel? = nil,
    now: Duration = .zero
  ) {
    guard
      case .start(_, var step) = machine.request(.ifNeeded, date: date, now: now, newFlightID: id)
    else {
      Issue.record("no flight started")
      return
    }
    // Its steps until the authorizer: reads find `stored`, the lease is granted.
    for _ in 0..<4 {
      let outcome: Machine.StepOutcome
      switch step.kind {
      case .authorize: return
      case .load, .confirmLease: outcome = .loaded(stored)
      case .acquireLease: outcome = .leaseAttempted(.acquired)
      default:
        Issue.record("flight \(id) took an unexpected step: \(step)")
        return
      }
      guard case .next(let next) = machine.advance(id, outcome, date: date, now: now) else {
        Issue.record("flight \(id) ended before authorizing")
        return
      }
      step = next
    }
    Issue.record("flight \(id) does not authorize")
  }

  /// Flight `id`, cold, finding the lease backing off until `date + seconds`.
  func findingTheLeaseBackingOff(
    _ machine: inout Machine, flight id: UInt64 = 1, for seconds: TimeInterval, failures: Int,
    code: String = "network_error", stored: AuthModel? = nil, now: Duration = .zero
  ) -> Machine.AdvanceAction {
    _ = machine.request(.ifNeeded, date: date, now: now, newFlightID: id)
    let action = machine.advance(id, .loaded(stored), date: date, now: now)
    #expect(action == .next(.init(kind: .acquireLease, deadline: now + .seconds(120))))
    return machine.advance(
      id, .leaseAttempted(.backingOff(until: date + seconds, failures: failures, code: code)),
      date: date, now: now)
  }

  @Test func aRememberedFailureIsHandedToTheLeaseAsABackOff() {
    var machine = Machine(key: key, policy: fleetPolicy(), random: { 0.5 })
    authorizingWithTheLease(&machine)
    // One attempt; three quarters of the first 1 s step.
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .next(
          .init(
            kind: .releaseLeaseBackingOff(
              LeaseBackOff(duration: .milliseconds(750), failures: 1, code: "network_error")),
            deadline: nil)))
    var ending = Ending(flight: 1, result: .failed(networkError))
    ending.cooldown = .milliseconds(750)
    #expect(machine.advance(1, .leaseReleased, date: date, now: .zero) == .end(ending))

    // A terminal failure: its cooldown, no transient failures.
    var terminal = Machine(key: key, policy: fleetPolicy(), random: { 0.5 })
    authorizingWithTheLease(&terminal)
    #expect(
      terminal.advance(1, .authorized(.failure(revoked)), date: date, now: .zero)
        == .next(
          .init(
            kind: .releaseLeaseBackingOff(
              LeaseBackOff(duration: .seconds(2), failures: 0, code: "authorization_failed")),
            deadline: nil)))
  }

  @Test func aFailureTheKeyDoesNotRememberReleasesThePlainLease() {
    var machine = Machine(key: key, policy: fleetPolicy(interactive: true), random: { 0.5 })
    authorizingWithTheLease(&machine)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .next(.init(kind: .releaseLease, deadline: nil)))
  }

  @Test func aLeaseBackingOffEndsTheFlightWithoutAuthorizingAndTheKeyRemembersIt() {
    var machine = Machine(key: key, policy: fleetPolicy(), random: { 0.5 })
    let action = findingTheLeaseBackingOff(&machine, for: 3, failures: 2)
    guard case .end(let ending) = action, case .failed(let error) = ending.result else {
      Issue.record("the flight did not end with the other process's failure: \(action)")
      return
    }
    #expect(error.code == .networkError)
    #expect(error.isTransient)
    #expect(error.retryAfter == .seconds(3))
    #expect(ending.cooldown == .seconds(3))
    #expect(ending.stale == nil)
    #expect(machine.flightID == nil)
    // Until the back-off ends, callers fail at once; the lease is not asked again.
    guard
      case .failFast(let fast) = machine.request(
        .ifNeeded, date: date + 1, now: .seconds(1), newFlightID: noNewFlight())
    else {
      Issue.record("the remembered back-off did not answer")
      return
    }
    #expect(fast.code == .networkError && fast.retryAfter == .seconds(2))
    // After it, one flight; its own failure backs off from the other process's two failures:
    // the third step (4 s, three quarters: 3 s), not the first.
    authorizingWithTheLease(&machine, flight: 2, now: .seconds(3))
    #expect(
      machine.advance(2, .authorized(.failure(networkError)), date: date, now: .seconds(3))
        == .next(
          .init(
            kind: .releaseLeaseBackingOff(
              LeaseBackOff(duration: .seconds(3), failures: 3, code: "network_error")),
            deadline: nil)))
  }

  @Test func aTerminalBackOffIsNotTransientAndNeverServesAStaleModel() {
    var machine = Machine(key: key, policy: fleetPolicy(servesStale: true), random: { 0.5 })
    let cached = model("t1", expiresIn: 30)
    let action = findingTheLeaseBackingOff(
      &machine, for: 2, failures: 0, code: "authorization_failed", stored: cached)
    guard case .end(let ending) = action, case .failed(let error) = ending.result else {
      Issue.record("the flight did not end: \(action)")
      return
    }
    #expect(error.code == .authorizationFailed)
    #expect(!error.isTransient)
    #expect(ending.stale == nil)
  }

  @Test func aTransientBackOffServesTheUnexpiredModelWhenThePolicySaysSo() {
    var machine = Machine(key: key, policy: fleetPolicy(servesStale: true), random: { 0.5 })
    // In the leeway (30 s left, 60 s leeway): the flight renews it.
    let cached = model("t1", expiresIn: 30)
    let action = findingTheLeaseBackingOff(&machine, for: 5, failures: 1, stored: cached)
    guard case .end(let ending) = action else {
      Issue.record("the flight did not end: \(action)")
      return
    }
    #expect(ending.stale == cached)
    #expect(
      machine.request(.ifNeeded, date: date + 2, now: .seconds(2), newFlightID: noNewFlight())
        == .serveStale(cached))
  }

  @Test func aBackOffLastsNoLongerThanAFlightMayHoldTheLease() {
    var machine = Machine(key: key, policy: fleetPolicy(), random: { 0.5 })
    let action = findingTheLeaseBackingOff(&machine, for: 10 * 365 * 86_400, failures: 1)
    guard case .end(let ending) = action else {
      Issue.record("the flight did not end: \(action)")
      return
    }
    #expect(ending.cooldown == fleetPolicy().maximumHold)
    // A back-off that already ended is no cooldown at all: the next request starts a flight.
    var ended = Machine(key: key, policy: fleetPolicy(), random: { 0.5 })
    guard case .end(let past) = findingTheLeaseBackingOff(&ended, for: -1, failures: 1) else {
      Issue.record("the flight did not end")
      return
    }
    #expect(past.cooldown == nil)
    guard case .start = ended.request(.ifNeeded, date: date, now: .zero, newFlightID: 2) else {
      Issue.record("a back-off in the past kept the key cooling down")
      return
    }
  }
}
