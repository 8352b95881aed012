import AuthCoordinator
import Testing

// The configuration's silent-refresh policy over the authorizer's (issue 37): the default
// takes the authorizer's, with the fields set on the configuration changed.
@Suite struct SilentRefreshPolicyResolutionTests {
  @Test func theDefaultIsTheAuthorizersOwnOrNoneWithoutOne() {
    let fresh = AuthCoordinator.Configuration().silentRefresh
    #expect(fresh.isAuthorizersOwn)
    var authorizers = SilentRefreshPolicy.recommended
    authorizers.maxAttempts = 7
    #expect(fresh.resolved(over: authorizers) == authorizers)
    #expect(fresh.resolved(over: nil) == .disabled)
  }

  @Test func aFieldSetOnTheDefaultReplacesOnlyThatFieldOfTheAuthorizers() {
    var configuration = AuthCoordinator.Configuration()
    configuration.silentRefresh.servesStaleOnError = true
    var authorizers = SilentRefreshPolicy.recommended
    authorizers.maxAttempts = 7
    authorizers.refreshAhead = .fixed(.seconds(90))
    let applied = configuration.silentRefresh.resolved(over: authorizers)
    #expect(applied.servesStaleOnError)
    #expect(applied.maxAttempts == 7)
    #expect(applied.refreshAhead == .fixed(.seconds(90)))
    #expect(!applied.isAuthorizersOwn)
    // Over a closure authorizer without a policy: `disabled`, stale-if-error on.
    let overNone = configuration.silentRefresh.resolved(over: nil)
    #expect(overNone.servesStaleOnError)
    #expect(overNone.maxAttempts == 1 && overNone.refreshAhead == nil)
  }

  @Test func aWholePolicyReplacesTheAuthorizers() {
    var configuration = AuthCoordinator.Configuration()
    configuration.silentRefresh = .disabled
    #expect(configuration.silentRefresh.resolved(over: .recommended) == .disabled)
    configuration.silentRefresh = .recommended
    configuration.silentRefresh.failureCooldown = .seconds(30)
    var authorizers = SilentRefreshPolicy.recommended
    authorizers.maxAttempts = 7
    let applied = configuration.silentRefresh.resolved(over: authorizers)
    #expect(applied.maxAttempts == 3, "a whole policy keeps its own fields")
    #expect(applied.failureCooldown == .seconds(30))
  }

  @Test func equalityComparesWhatApplies() {
    var one = SilentRefreshPolicy.authorizersOwn
    one.servesStaleOnError = true
    var other = SilentRefreshPolicy.authorizersOwn
    other.servesStaleOnError = true
    #expect(one == other)
    #expect(one.hashValue == other.hashValue)
    #expect(one != .authorizersOwn)
    #expect(SilentRefreshPolicy.authorizersOwn != .recommended, "inheriting is not the same")
    var set = SilentRefreshPolicy.recommended
    set.maxAttempts = 3  // the value it had
    #expect(set == .recommended)
  }
}
