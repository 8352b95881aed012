import Foundation
import Testing

@testable import AuthCoordinator
@testable import TokenStore

/// The seams issue's breaks that the machine decides, tested without tasks: each transition
/// here was wrong on the main of 2026-12-04 (4ba0ba1).
@Suite(.timeLimit(.minutes(1))) struct AccountStateMachineSeamsTests: StateMachineFixture {
  let networkError = AuthCoordinatorError(.networkError, "down")

  func silentPolicy(_ silent: SilentRefreshPolicy, interactive: Bool = false) -> Machine.Policy {
    var policy = self.policy
    policy.interactiveAuthorizer = interactive
    policy.silent = silent
    return policy
  }

  /// Break 6: a forced caller joined a renewal that then failed transiently; stale-if-error
  /// served it the very token it rejected (rule 27).
  @Test func staleIfErrorNeverServesTheTokenAJoinerRejected() {
    var silent = SilentRefreshPolicy(refreshAhead: nil, maxAttempts: 1)
    silent.servesStaleOnError = true
    var machine = Machine(key: key, policy: silentPolicy(silent), random: { 1 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    // In the leeway: a renewal starts; a forced refresh rejecting t1 joins it while it calls
    // the authorizer.
    let inLeeway = date + 3570
    _ = machine.request(.ifNeeded, date: inLeeway, now: .seconds(3570), newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t1")), date: inLeeway, now: .seconds(3570))
    #expect(
      machine.request(
        .force(rejecting: "t1"), date: inLeeway, now: .seconds(3570), newFlightID: noNewFlight())
        == .join(flight: 2))
    guard
      case .end(let ending) = machine.advance(
        2, .authorized(.failure(networkError)), date: inLeeway, now: .seconds(3570))
    else {
      Issue.record("the failure ends the flight")
      return
    }
    #expect(ending.stale == nil, "t1 was rejected by a caller of this flight")
  }

  /// Break 8: a failure count read from a lease (`Int.max`) trapped in the back-off arithmetic,
  /// and a loop bounded by the count ran under the stripe lock.
  @Test func aFailureCountReadFromALeaseIsClampedAndTheBackOffIsO1() {
    #expect(Machine.backoff(Int.max, first: .seconds(1), limit: .seconds(30)) == .seconds(30))
    #expect(Machine.backoff(Int.max, first: .zero, limit: .seconds(30)) == .zero)
    #expect(Machine.backoff(3, first: .seconds(1), limit: .seconds(30)) == .seconds(4))
    var machine = Machine(
      key: key, policy: silentPolicy(SilentRefreshPolicy(refreshAhead: nil)), random: { 1 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    var lease = policy(usesLease: true)
    lease.interactiveAuthorizer = false
    lease.silent = SilentRefreshPolicy(refreshAhead: nil)
    var leased = Machine(key: key, policy: lease, random: { 1 })
    _ = leased.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = leased.advance(1, .loaded(nil), date: date, now: .zero)
    _ = leased.advance(
      1, .leaseAttempted(.backingOff(until: date + 5, failures: Int.max, code: "network_error")),
      date: date, now: .zero)
    #expect(leased.transientFailures == Machine.maxCountedFailures)
    // The next failure neither traps nor grows past the bound.
    _ = leased.request(.ifNeeded, date: date + 10, now: .seconds(10), newFlightID: 2)
    _ = leased.advance(2, .leaseAttempted(.acquired), date: date + 10, now: .seconds(10))
    _ = leased.advance(2, .loaded(nil), date: date + 10, now: .seconds(10))
    _ = leased.advance(2, .authorized(.failure(networkError)), date: date + 10, now: .seconds(10))
    #expect(leased.transientFailures == Machine.maxCountedFailures)
  }

  /// Break 9: an evicted key forgot its cooldown, and asked a refusing server again at once.
  @Test func aKeyCoolingDownIsNotEvictableUntilTheCooldownEnds() {
    let silent = SilentRefreshPolicy(refreshAhead: nil, failureCooldown: .seconds(120))
    var machine = Machine(key: key, policy: silentPolicy(silent), random: { 1 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    let refused = AuthCoordinatorError(.authorizationFailed, "invalid_client", transient: false)
    _ = machine.advance(1, .authorized(.failure(refused)), date: date, now: .zero)
    #expect(machine.flightID == nil)
    #expect(!machine.isEvictable(now: .seconds(60)), "the cooldown runs until 120 s")
    #expect(machine.isEvictable(now: .seconds(121)))
  }

  /// Break 13: an ordinary caller (who may involve the user) joined a refresh ahead, which may
  /// not; the authorizer answered `interaction_required` and the caller failed with it.
  @Test func aCallerJoiningARefreshAheadThatNeedsTheUserGetsAnInteractiveAuthorization() {
    let silent = SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600)))
    var machine = Machine(key: key, policy: silentPolicy(silent, interactive: true), random: { 0 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    let inside = date + 3000
    guard
      case .serveAndRefreshAhead = machine.request(
        .ifNeeded, date: inside, now: .seconds(3000), newFlightID: 2)
    else {
      Issue.record("a refresh ahead starts")
      return
    }
    _ = machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3000))
    // The container rejects t1: the forced caller joins the background refresh.
    #expect(
      machine.request(
        .force(rejecting: "t1"), date: inside, now: .seconds(3000), newFlightID: noNewFlight())
        == .join(flight: 2))
    let needsUser = AuthCoordinatorError(.interactionRequired, "the user must authorize")
    #expect(
      machine.advance(2, .authorized(.failure(needsUser)), date: inside, now: .seconds(3001))
        == .next(authorize(.forcedRefresh, by: .seconds(3121), replacing: model("t1"))))
  }

  /// Under the lease, the interactive authorization for the joined caller confirms the grant
  /// and re-reads the store first (the declined call was a wait too).
  @Test func underTheLeaseTheInteractiveAuthorizationForAJoinerConfirmsTheGrantFirst() {
    var policy = silentPolicy(
      SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600))), interactive: true)
    policy.usesLease = true
    var machine = Machine(key: key, policy: policy, random: { 0 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .leaseAttempted(.acquired), date: date, now: .zero)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    _ = machine.advance(1, .leaseReleased, date: date, now: .zero)
    let inside = date + 3000
    _ = machine.request(.ifNeeded, date: inside, now: .seconds(3000), newFlightID: 2)
    _ = machine.advance(2, .leaseAttempted(.acquired), date: inside, now: .seconds(3000))
    _ = machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3000))
    #expect(
      machine.request(
        .force(rejecting: "t1"), date: inside, now: .seconds(3000), newFlightID: noNewFlight())
        == .join(flight: 2))
    let needsUser = AuthCoordinatorError(.interactionRequired, "the user must authorize")
    #expect(
      machine.advance(2, .authorized(.failure(needsUser)), date: inside, now: .seconds(3001))
        == .next(Machine.Step(kind: .confirmLease, deadline: .seconds(3008))))
    #expect(
      machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3002))
        == .next(authorize(.forcedRefresh, by: .seconds(3122), replacing: model("t1"))))
  }

  /// Without a caller, a refresh ahead that needs the user just fails (it never bounces).
  @Test func aRefreshAheadNobodyJoinedNeverInvolvesTheUser() {
    let silent = SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600)))
    var machine = Machine(key: key, policy: silentPolicy(silent, interactive: true), random: { 0 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model("t1"))), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    let inside = date + 3000
    _ = machine.request(.ifNeeded, date: inside, now: .seconds(3000), newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3000))
    let needsUser = AuthCoordinatorError(.interactionRequired, "the user must authorize")
    guard
      case .end(let ending) = machine.advance(
        2, .authorized(.failure(needsUser)), date: inside, now: .seconds(3001))
    else {
      Issue.record("the refresh ahead ends")
      return
    }
    #expect(ending.result == .failed(needsUser))
  }
}

/// Break 12 and break 3, outside the machine.
@Suite struct KeyAndHoldSeamsTests {
  /// One account in two Unicode spellings was one key in memory and two in rows and files.
  @Test func anAccountInTwoUnicodeSpellingsIsOneKeyInMemoryFilesAndRows() throws {
    let precomposed = AccountKey(account: "Jos\u{E9}")
    let combining = AccountKey(account: "Jose\u{301}")
    #expect(precomposed == combining)
    #expect(
      Array(precomposed.account.utf8) == Array(combining.account.utf8), "the bytes a row hashes")
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let encoded = try encoder.encode(combining)
    #expect(try encoder.encode(precomposed) == encoded, "the bytes a file holds")
    let decoded = try JSONDecoder().decode(
      AccountKey.self, from: Data(#"{"mcUid":"Jose\u0301","mode":"platformOnly"}"#.utf8))
    #expect(Array(decoded.account.utf8) == Array(precomposed.account.utf8))
    var key = AccountKey(account: "a")
    key.account = "Jose\u{301}"
    #expect(Array(key.account.utf8) == Array(precomposed.account.utf8))
    #expect(AccountKey.normalized("plain-ascii") == "plain-ascii")
  }

  /// The service article's `authorizationTimeout: .seconds(2)` derived a 6 s hold: a refresh
  /// answered in 7 s was abandoned and the next one spent the old token again.
  @Test func theMaximumHoldCoversTheAuthorizersLongestRefreshAndItsRetries() {
    let configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(2))
    #expect(AuthCoordinator.maximumHold(configuration, interactive: false) == .seconds(6))
    let silent = SilentRefreshPolicy.recommended
    let hold = AuthCoordinator.maximumHold(
      configuration, interactive: false, longestRefresh: .seconds(35), silent: silent)
    #expect(
      hold >= .seconds(35) * silent.maxAttempts + silent.maxRetryWait * (silent.maxAttempts - 1))
    var explicit = configuration
    explicit.maximumHold = .seconds(10)
    #expect(
      AuthCoordinator.maximumHold(
        explicit, interactive: false, longestRefresh: .seconds(35), silent: silent) == hold,
      "an explicit hold shorter than the authorizer's refresh is raised to it")
  }
}
