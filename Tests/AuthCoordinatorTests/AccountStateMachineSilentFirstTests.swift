import Foundation
import Testing

@testable import AuthCoordinator

/// A silent-first authorizer's flights (issue 36), on the machine alone: until the authorizer
/// turns to the user, its failures are a silent authorizer's (retried, remembered); after, an
/// interactive one's; and "the user must act" is never remembered.
@Suite(.timeLimit(.minutes(2))) struct AccountStateMachineSilentFirstTests: StateMachineFixture {
  let networkError = AuthCoordinatorError(.networkError, "the refresh endpoint is down")
  let refused = AuthCoordinatorError(.authorizationFailed, "refused", transient: false)
  let needsUser = AuthCoordinatorError(.interactionRequired, "the family ended")

  /// An interactive authorizer that announces interaction, under the recommended policy.
  var silentFirstPolicy: Machine.Policy {
    var policy = self.policy
    policy.interactiveAuthorizer = true
    policy.announcesInteraction = true
    policy.silent = SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600)))
    return policy
  }

  /// A missing key's flight 1 whose authorizer is being called (jitter pinned at 0.5).
  func authorizing(_ policy: Machine.Policy) -> Machine {
    var machine = Machine(key: key, policy: policy, random: { 0.5 })
    _ = machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 1)
    #expect(
      machine.advance(1, .loaded(nil), date: date, now: .zero)
        == .next(authorize(.missing, by: .seconds(120))))
    return machine
  }

  @Test func aTransientFailureOfTheSilentStageIsRetriedAfterABackOff() {
    var machine = authorizing(silentFirstPolicy)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .next(
          .init(
            kind: .awaitRetry(
              until: .milliseconds(750), attempt: 2, delay: .milliseconds(750),
              code: .networkError), deadline: nil)))
  }

  @Test func theSilentStagesLastFailureIsRememberedSoCallersFailFastWithoutABounce() {
    var policy = silentFirstPolicy
    policy.silent.maxAttempts = 1
    var machine = authorizing(policy)
    var ending = Ending(flight: 1, result: .failed(networkError))
    ending.cooldown = .milliseconds(750)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .end(ending))
    // A forced refresh (the container's NeedRefreshToken) gets the error too: no flight, so
    // no bounce, until the back-off step ends.
    guard
      case .failFast(let error) = machine.request(
        .force(rejecting: nil), date: date, now: .milliseconds(500), newFlightID: noNewFlight())
    else {
      Issue.record("the remembered failure did not answer")
      return
    }
    #expect(error.code == .networkError && error.retryAfter == .milliseconds(250))
    #expect(
      machine.request(.ifNeeded, date: date, now: .seconds(1), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(8))))
  }

  @Test func aTerminalFailureOfTheSilentStageIsRememberedForTheCooldown() {
    var machine = authorizing(silentFirstPolicy)
    var ending = Ending(flight: 1, result: .failed(refused))
    ending.cooldown = .seconds(2)
    #expect(
      machine.advance(1, .authorized(.failure(refused)), date: date, now: .zero) == .end(ending))
  }

  @Test func onceTheUserIsInvolvedAFailureIsNeitherRetriedNorRemembered() {
    var machine = authorizing(silentFirstPolicy)
    machine.interactionBegan(1)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .end(Ending(flight: 1, result: .failed(networkError))))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
  }

  @Test func theUserMustActIsNeverRememberedSoTheNextCallerGetsTheBounce() {
    // A refresh ahead (or an extension's request) cannot bounce: the silent stage's "the user
    // must act" ends it, and the next ordinary caller starts a flight at once.
    var machine = authorizing(silentFirstPolicy)
    #expect(
      machine.advance(1, .authorized(.failure(needsUser)), date: date, now: .zero)
        == .end(Ending(flight: 1, result: .failed(needsUser))))
    #expect(
      machine.request(.ifNeeded, date: date, now: .zero, newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(7))))
  }

  @Test func aSilentAuthorizersUserMustActIsNotRememberedEitherSoASignInGoesThrough() {
    // The integrator's server: its silent authorizer has no refresh token for the user (the
    // app is told to bounce); the sign-in with the auth code the user brings back seconds
    // later must start a flight, not get the remembered "the user must act".
    var policy = silentFirstPolicy
    policy.interactiveAuthorizer = false
    policy.announcesInteraction = false
    var machine = authorizing(policy)
    #expect(
      machine.advance(1, .authorized(.failure(needsUser)), date: date, now: .zero)
        == .end(Ending(flight: 1, result: .failed(needsUser))))
    #expect(
      machine.request(.force(rejecting: nil), date: date, now: .seconds(1), newFlightID: 2)
        == .start(flight: 2, load(by: .seconds(8))))
  }

  @Test func anInteractionAnnouncedByAnAuthorizerThatDoesNotSayItWillChangesNothing() {
    // Without `announcesInteraction`, an interactive authorizer's failures are never retried:
    // a stray announcement is ignored, as is a stale one for another flight.
    var policy = silentFirstPolicy
    policy.announcesInteraction = false
    var machine = authorizing(policy)
    machine.interactionBegan(1)
    #expect(
      machine.advance(1, .authorized(.failure(networkError)), date: date, now: .zero)
        == .end(Ending(flight: 1, result: .failed(networkError))))
    var silentFirst = authorizing(silentFirstPolicy)
    silentFirst.interactionBegan(7)
    guard
      case .next(let step) = silentFirst.advance(
        1, .authorized(.failure(networkError)), date: date, now: .zero),
      case .awaitRetry = step.kind
    else {
      Issue.record("a stale announcement made the silent stage interactive")
      return
    }
  }
}
