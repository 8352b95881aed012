import Foundation
import Testing

@testable import AuthCoordinator

/// A silent-refresh policy's decisions (issue 24): refresh ahead, retries, cooldowns and
/// stale-if-error, on the machine alone (no tasks, no clock; the jitter source is pinned).
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineSilentRefreshTests: StateMachineFixture {
  let networkError = AuthCoordinatorError(.networkError, "down")
  let revoked = AuthCoordinatorError(.authorizationFailed, "revoked", transient: false)

  func silentPolicy(
    _ silent: SilentRefreshPolicy = SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600))),
    interactive: Bool = false
  ) -> Machine.Policy {
    var policy = self.policy
    policy.interactiveAuthorizer = interactive
    policy.silent = silent
    return policy
  }

  /// A machine (jitter pinned at `random`) that authorized `token`, valid for an hour from
  /// `date`, in flight 1.
  func warm(
    _ policy: Machine.Policy, token: String = "t1", random: Double = 0
  ) -> Machine {
    var machine = Machine(key: key, policy: policy, random: { random })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    _ = machine.advance(1, .authorized(.success(model(token))), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    #expect(machine.cachedModel == model(token))
    return machine
  }

  /// A missing key's flight 1, on a silent policy, whose authorizer is being called.
  func authorizing(_ policy: Machine.Policy) -> Machine {
    var machine = Machine(key: key, policy: policy, random: { 0.5 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.missing, by: .seconds(120))))
    return machine
  }

  /// The end of flight `flight` failing with `error`, the key cooling down for `cooldown`, its
  /// waiters getting `stale` instead.
  func failed(
    _ error: AuthCoordinatorError, flight: UInt64 = 1, cooldown: Duration? = nil,
    stale: AuthModel? = nil
  ) -> Machine.AdvanceAction {
    var ending = Ending(flight: flight, result: .failed(error))
    ending.cooldown = cooldown
    ending.stale = stale
    return .end(ending)
  }

  func retry(_ until: Duration, attempt: Int, delay: Duration) -> Machine.AdvanceAction {
    .next(
      .init(
        kind: .awaitRetry(until: until, attempt: attempt, delay: delay, code: .networkError),
        deadline: nil))
  }

  // MARK: - Refresh ahead

  @Test func theWindowScalesWithTheLifetimeAndNeverExceedsHalfOfIt() {
    let policy = SilentRefreshPolicy.recommended
    #expect(policy.window(forLifetime: .seconds(4 * 60)) == .seconds(2 * 60))
    #expect(policy.window(forLifetime: .seconds(20 * 60)) == .seconds(5 * 60))
    #expect(policy.window(forLifetime: .seconds(60 * 60)) == .seconds(15 * 60))
    #expect(policy.window(forLifetime: .seconds(3 * 3600)) == .seconds(60 * 60))
    #expect(
      SilentRefreshPolicy(refreshAhead: .fixed(.seconds(30))).window(
        forLifetime: .seconds(3600)) == .seconds(30))
    #expect(SilentRefreshPolicy.disabled.window(forLifetime: .seconds(3600)) == nil)
  }

  @Test func jitterMovesEachModelsPointWithinTheWindowButNeverIntoTheLeeway() {
    let expiring = model("t1")
    let expiresAt = expiring.expiresAt!
    let atZero = Machine(key: key, policy: silentPolicy(), random: { 0 })
    #expect(atZero.refreshAheadDate(for: expiring, arrivedAt: date) == expiresAt - 600)
    // Half the window is jitter by default: at the top of the range, 300 s before expiry.
    let atHalf = Machine(key: key, policy: silentPolicy(), random: { 0.5 })
    #expect(atHalf.refreshAheadDate(for: expiring, arrivedAt: date) == expiresAt - 450)
    // A window no wider than the leeway (60 s here) leaves nothing to refresh ahead in.
    let narrow = Machine(
      key: key, policy: silentPolicy(SilentRefreshPolicy(refreshAhead: .fixed(.seconds(60)))),
      random: { 0 })
    #expect(narrow.refreshAheadDate(for: expiring, arrivedAt: date) == nil)
    #expect(
      Machine(key: key, policy: policy).refreshAheadDate(for: expiring, arrivedAt: date) == nil)
    // No expiry, no refresh ahead; a far future expiry does not overflow.
    #expect(atZero.refreshAheadDate(for: model("t1", expiresIn: nil), arrivedAt: date) == nil)
    #expect(
      atZero.refreshAheadDate(
        for: AuthModel(uid: "2088", accessToken: "t", mcUid: "u1", expiresAt: .distantFuture),
        arrivedAt: date) != nil)
  }

  @Test func aTwoMinuteTokenIsRefreshedAheadUnderTheDefaultLeeway() {
    // Issue 37: with the default 60 s leeway, a token of 120 s or less never had a refresh
    // ahead (its window, half its life, lay inside its leeway, half its life too). Now its
    // refresh ahead is due halfway through the life it has before the leeway (jitter 0):
    // 30 s after it arrived. Its leeway stays 60 s.
    let policy = silentPolicy(SilentRefreshPolicy.recommended)
    var machine = Machine(key: key, policy: policy, random: { 0 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    _ = machine.advance(1, .loaded(nil), date: date, now: .zero)
    let short = model("t1", expiresIn: 120)
    _ = machine.advance(1, .authorized(.success(short)), date: date, now: .zero)
    _ = machine.advance(1, .saved, date: date, now: .zero)
    #expect(machine.refreshAheadDate(for: short, arrivedAt: date) == date + 30)
    #expect(machine.servableModel(at: date + 29) == short)
    #expect(
      machine.request(.ifNeeded, date: date + 40, now: .seconds(40), newFlightID: 2)
        == .serveAndRefreshAhead(short, flight: 2, load(by: .seconds(47))))
    // Served until its leeway (60 s before expiry) while the refresh runs; not after.
    #expect(machine.servableModel(at: date + 59) == short)
    #expect(machine.servableModel(at: date + 60) == nil)
    // The jitter moves the point within the first half of that life: at the top, 45 s.
    let late = Machine(key: key, policy: policy, random: { 1 })
    #expect(late.refreshAheadDate(for: short, arrivedAt: date) == date + 45)
    // A 4-minute token whose jittered window falls inside the leeway (jitter 1: 60 s) too.
    let four = model("t2", expiresIn: 240)
    #expect(late.refreshAheadDate(for: four, arrivedAt: date) == date + 135)
  }

  @Test func aHitInsideTheWindowIsServedAndStartsOneBackgroundRefresh() {
    var machine = warm(silentPolicy())
    let before = date + 3000 - 1
    let inside = date + 3000
    #expect(
      machine.request(.ifNeeded, date: before, now: .zero, newFlightID: noNewFlight())
        == .serve(model("t1")))
    // The lock-only hit path leaves a due refresh to the decision below.
    #expect(machine.servableModel(at: before) == model("t1"))
    #expect(machine.servableModel(at: inside) == nil)
    // The re-read first (another process may have refreshed), under the store's deadline.
    #expect(
      machine.request(.ifNeeded, date: inside, now: .seconds(3000), newFlightID: 2)
        == .serveAndRefreshAhead(model("t1"), flight: 2, load(by: .seconds(3007))))
    // Every later hit is served from memory and starts nothing.
    #expect(machine.servableModel(at: inside) == model("t1"))
    #expect(
      machine.request(.ifNeeded, date: inside, now: .seconds(3000), newFlightID: noNewFlight())
        == .serve(model("t1")))
    #expect(machine.lastWaiterLeft(2) == .keepRunning)
    #expect(
      machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3000))
        == .next(authorize(.refreshAhead, by: .seconds(3120), replacing: model("t1"))))
    // Callers that reach the leeway meanwhile join it.
    let leeway = date + 3600 - 30
    #expect(
      machine.request(.ifNeeded, date: leeway, now: .seconds(3570), newFlightID: noNewFlight())
        == .join(flight: 2))
    _ = machine.advance(
      2, .authorized(.success(model("t2", expiresIn: 7200))), date: leeway, now: .seconds(3570))
    #expect(
      machine.advance(2, .saved, date: leeway, now: .seconds(3570))
        == .end(Ending(flight: 2, result: .succeeded(model("t2", expiresIn: 7200)))))
    #expect(
      machine.request(.ifNeeded, date: leeway, now: .seconds(3570), newFlightID: noNewFlight())
        == .serve(model("t2", expiresIn: 7200)))
  }

  @Test func aDeclinedRefreshAheadIsNotTriedAgainForTheSameModel() {
    var machine = warm(silentPolicy(interactive: true))
    let inside = date + 3100
    guard
      case .serveAndRefreshAhead(_, 2, _) = machine.request(
        .ifNeeded, date: inside, now: .seconds(3100), newFlightID: 2)
    else {
      Issue.record("no refresh ahead")
      return
    }
    _ = machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3100))
    let declined = AuthCoordinatorError(.interactionRequired, "needs the user")
    #expect(
      machine.advance(2, .authorized(.failure(declined)), date: inside, now: .seconds(3100))
        == .end(Ending(flight: 2, result: .failed(declined))))
    #expect(
      machine.request(
        .ifNeeded, date: inside + 100, now: .seconds(3200), newFlightID: noNewFlight())
        == .serve(model("t1")))
    // The leeway still renews it the usual way, with the user.
    #expect(
      machine.request(.ifNeeded, date: date + 3550, now: .seconds(3550), newFlightID: 3)
        == .start(flight: 3, load(by: .seconds(3557))))
  }

  @Test func aRefreshAheadThatFailedTransientlyIsDueAgainAfterItsCooldown() {
    var policy = SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600)), maxAttempts: 1)
    policy.retryDelay = .seconds(4)
    // Jitter pinned at 0.5: due 450 s before expiry.
    var machine = warm(silentPolicy(policy), random: 0.5)
    #expect(
      machine.request(
        .ifNeeded, date: date + 3149, now: .seconds(3149), newFlightID: noNewFlight())
        == .serve(model("t1")))
    let inside = date + 3200
    _ = machine.request(.ifNeeded, date: inside, now: .seconds(3200), newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t1")), date: inside, now: .seconds(3200))
    #expect(
      machine.advance(2, .authorized(.failure(networkError)), date: inside, now: .seconds(3200))
        == failed(networkError, flight: 2, cooldown: .seconds(3)))
    #expect(
      machine.request(.ifNeeded, date: inside, now: .seconds(3202), newFlightID: noNewFlight())
        == .serve(model("t1")))
    #expect(
      machine.request(.ifNeeded, date: inside, now: .seconds(3203), newFlightID: 3)
        == .serveAndRefreshAhead(model("t1"), flight: 3, load(by: .seconds(3210))))
  }

  // MARK: - Retries

  @Test func aTransientFailureIsRetriedWithABackOffThatDoublesThenTheKeyCoolsDown() {
    var machine = authorizing(silentPolicy())
    // Jitter pinned at 0.5: three quarters of 1 s, 2 s, 4 s.
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .seconds(1))
        == retry(.milliseconds(1750), attempt: 2, delay: .milliseconds(750)))
    #expect(
      machine.advance(1, .backedOff, date: date, now: .milliseconds(1750))
        == .next(authorize(.missing, by: nil)))
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .seconds(2))
        == retry(.milliseconds(3500), attempt: 3, delay: .milliseconds(1500)))
    _ = machine.advance(1, .backedOff, date: date, now: .milliseconds(3500))
    // The third attempt is the last: the flight fails, and the key remembers it for the next
    // step of the back-off.
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .seconds(4))
        == failed(networkError, cooldown: .seconds(3)))
    var remembered = networkError
    remembered.retryAfter = .seconds(2)
    guard
      case .failFast(let error) = machine.request(
        .ifNeeded, date: date, now: .seconds(5), newFlightID: noNewFlight())
    else {
      Issue.record("the cooldown did not answer")
      return
    }
    #expect(error.code == .networkError && error.retryAfter == .seconds(2))
    #expect(
      machine.request(
        .force(rejecting: nil), date: date, now: .seconds(5), newFlightID: noNewFlight())
        == .failFast(remembered))
    // After it, one flight; its first failure backs off 8 s (three quarters: 6 s).
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(7), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(14))))
    _ = machine.advance(2, .loaded(nil), date: date, now: .seconds(7))
    #expect(
      machine.advance(2, .authorized(.failure(networkError)), date: date, now: .seconds(7))
        == failed(networkError, flight: 2, cooldown: .seconds(6)))
  }

  @Test func retryAfterLengthensTheBackOffAndOneTooLongEndsTheFlightAtOnce() {
    var machine = authorizing(silentPolicy())
    let throttled = AuthCoordinatorError(
      .authorizationFailed, "429", transient: true, retryAfter: .seconds(2))
    #expect(
      machine.advance(1, .authorized(.failure(throttled)), date: date, now: .zero)
        == .next(
          .init(
            kind: .awaitRetry(
              until: .seconds(2), attempt: 2, delay: .seconds(2), code: .authorizationFailed),
            deadline: nil)))
    _ = machine.advance(1, .backedOff, date: date, now: .seconds(2))
    // Beyond the longest wait inside a flight (5 s): the callers get the error now.
    let down = AuthCoordinatorError(
      .authorizationFailed, "503", transient: true, retryAfter: .seconds(7))
    #expect(
      machine.advance(1, .authorized(.failure(down)), date: date, now: .seconds(2))
        == failed(down, cooldown: .seconds(7)))
  }

  @Test func noRetryWaitsPastTheFlightsDeadline() {
    var machine = authorizing(silentPolicy())
    // The authorization deadline is 120 s after the start; 0.75 s from 119.5 s is past it.
    #expect(
      machine.advance(
        1, .authorized(.failure(networkError)), date: date, now: .milliseconds(119_500))
        == failed(networkError, cooldown: .milliseconds(750)))
  }

  @Test func aTerminalFailureIsRememberedForTheCooldownAndNeverRetried() {
    var machine = authorizing(silentPolicy())
    #expect(
      machine.advance(1, .authorized(.failure(revoked)), date: date, now: .seconds(1))
        == failed(revoked, cooldown: .seconds(2)))
    for caller in 0..<3 {
      guard
        case .failFast(let error) = machine.request(
          .ifNeeded, date: date, now: .seconds(1) + .milliseconds(caller * 500),
          newFlightID: noNewFlight())
      else {
        Issue.record("caller \(caller) was not answered by the cooldown")
        continue
      }
      #expect(error.code == .authorizationFailed)
    }
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(3), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(10))))
  }

  /// An interactive authorizer under a policy, and a silent one without a policy.
  @Test(arguments: [true, false])
  func interactiveAuthorizersAndNoPolicyNeitherRetryNorRememberFailures(interactive: Bool) {
    var policy = silentPolicy(interactive: true)
    if !interactive {
      policy = self.policy
      policy.interactiveAuthorizer = false
    }
    var machine = authorizing(policy)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == failed(networkError))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
  }

  @Test func aSignOutForgetsTheRememberedFailure() {
    var machine = authorizing(silentPolicy())
    _ = machine.advance(1, .authorized(.failure(revoked)), date: date, now: .zero)
    #expect(machine.signOut() == nil)
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
  }

  // MARK: - Stale-if-error

  @Test func staleIfErrorServesTheUnexpiredModelUntilItExpiresAndNeverAfter() {
    var silent = SilentRefreshPolicy(refreshAhead: nil, maxAttempts: 1)
    silent.servesStaleOnError = true
    silent.retryDelay = .seconds(40)
    silent.maxRetryDelay = .seconds(60)
    var machine = warm(silentPolicy(silent), random: 1)
    // In the leeway (30 s left): callers wait for the renewal.
    let inLeeway = date + 3570
    #expect(
      machine.request(.ifNeeded, date: inLeeway, now: .seconds(3570), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(3577))))
    _ = machine.advance(2, .loaded(model("t1")), date: inLeeway, now: .seconds(3570))
    #expect(
      machine.advance(2, .authorized(.failure(networkError)), date: inLeeway, now: .seconds(3570))
        == failed(networkError, flight: 2, cooldown: .seconds(40), stale: model("t1")))
    // During the cooldown: the same model, with its own expiry, while it has not expired.
    #expect(
      machine.request(.ifNeeded, date: date + 3590, now: .seconds(3590), newFlightID: noNewFlight())
        == .serveStale(model("t1")))
    // A caller that rejected it never gets it back.
    guard
      case .failFast = machine.request(
        .force(rejecting: "t1"), date: date + 3590, now: .seconds(3590),
        newFlightID: noNewFlight())
    else {
      Issue.record("a rejected token was served stale")
      return
    }
    // Expired: never served.
    guard
      case .failFast = machine.request(
        .ifNeeded, date: date + 3600, now: .seconds(3600), newFlightID: noNewFlight())
    else {
      Issue.record("an expired model was served")
      return
    }
  }

  @Test func aTerminalFailureIsNeverAnsweredWithAStaleModel() {
    var silent = SilentRefreshPolicy(refreshAhead: nil, maxAttempts: 1)
    silent.servesStaleOnError = true
    var machine = warm(silentPolicy(silent))
    let inLeeway = date + 3570
    _ = machine.request(.ifNeeded, date: inLeeway, now: .seconds(3570), newFlightID: 2)
    _ = machine.advance(2, .loaded(model("t1")), date: inLeeway, now: .seconds(3570))
    #expect(
      machine.advance(2, .authorized(.failure(revoked)), date: inLeeway, now: .seconds(3570))
        == failed(revoked, flight: 2, cooldown: .seconds(2)))
    guard
      case .failFast = machine.request(
        .ifNeeded, date: inLeeway, now: .seconds(3571), newFlightID: noNewFlight())
    else {
      Issue.record("a terminal failure served a stale model")
      return
    }
  }
}
