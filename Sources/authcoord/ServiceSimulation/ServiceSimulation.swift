import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation

/// One run of `authcoord simulate --service`: a Swift service that calls an API on its own
/// behalf, with one token shared by its concurrent requests through the REAL ``AuthCoordinator``,
/// ``OAuth2Authorizer`` (silent: client credentials, then rotating refresh tokens) and
/// ``BearerClient``, against a SIMULATED OAuth 2 token server and a SIMULATED resource server
/// (the TestKit's `SimulatedTokenServer` and `SimulatedResourceServer`, HTTP transports in
/// process). Time is virtual (``VirtualWorld``): the
/// outcome and the timeline are the same on every run.
///
/// The phases (``ServiceScenario``): a cold start, the token's expiries, a storm of access-token
/// revocations that the loop guard slows down, a token endpoint slower than the deadline, a
/// flaky server, and two audiences then a sign-out that revokes.
struct ServiceSimulation {
  let options: SimulateCommand.Options

  /// The account the service authorizes as.
  static let key = AccountKey(account: "reports-service")
  /// The simulated token endpoint (nothing is sent to it: the transport is in process).
  static let tokenEndpoint = URL(string: "https://auth.simulated.example/oauth/token")!
  /// The simulated revocation endpoint (RFC 7009), answered by the same simulated server.
  static let revocationEndpoint = URL(string: "https://auth.simulated.example/oauth/revoke")!
  /// How long the token endpoint normally takes to answer.
  static let responseDelay: Duration = .milliseconds(200)

  /// Plays the scenario on `clock`, a ``VirtualClock`` (see ``VirtualWorld``).
  func run(clock: VirtualClock) async -> Simulation.Report {
    let timeline = ServiceTimeline(clock: clock, quiet: options.quiet)
    // The token endpoint and the API are SIMULATED, in process (the TestKit's servers, which
    // are HTTP transports); nothing goes over a network.
    let tokenServer = SimulatedTokenServer(
      clock: clock, responseDelay: Self.responseDelay, tokenLifetime: options.tokenLifetime,
      date: { timeline.date }, log: { timeline.detail($0) })
    let resource = SimulatedResourceServer(tokenServer: tokenServer)
    // The service's authorizer is the REAL OAuth2Authorizer: silent (client credentials, no
    // user is ever involved), so the coordinator keeps one deadline and its loop guard delays
    // instead of failing. It does a refresh-token grant with the refresh token of the model
    // being replaced, and client_credentials when there is none.
    var authorizer = OAuth2Authorizer(
      tokenEndpoint: Self.tokenEndpoint, revocationEndpoint: Self.revocationEndpoint,
      clientID: Self.key.account, transport: tokenServer, now: { timeline.date })
    // Phase 6: two more APIs, each its own audience and scope: one authorizer, a token per
    // mode of the key (``ServiceScenario/audiences``).
    for (mode, audience, scope) in ServiceScenario.audiences {
      authorizer.requests[mode] = OAuth2Authorizer.TokenRequest(scope: scope, audience: audience)
    }
    // The REAL coordinator, on the virtual clock: its deadlines and the loop guard's back-off
    // sleep on it, and expiry is measured against the demo's date, which moves with it.
    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: options.authorizationTimeout)
    configuration.clock = clock
    configuration.now = { timeline.date }
    // The OAuth2Authorizer's own policy, with stale-if-error on for phase 5; the jitter is
    // pinned at the middle of its range so that the timeline is the same on every run.
    var silent = SilentRefreshPolicy.recommended
    silent.servesStaleOnError = true
    configuration.silentRefresh = silent
    configuration.random = { 0.5 }
    let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
    let printer = timeline.follow(coordinator.events)

    // The REAL BearerClient: the token for the API's origin only, one forced refresh and one
    // retry on a 401. Its own deadline is well past the coordinator's, which bounds the calls.
    let client = BearerClient(
      coordinator: coordinator, key: Self.key, origin: ServiceRequest.reports,
      transport: resource, deadline: options.authorizationTimeout * 3, clock: clock)

    let scenario = ServiceScenario(
      options: options, configuration: configuration, clock: clock, timeline: timeline,
      tokenServer: tokenServer, resource: resource, coordinator: coordinator, client: client)
    await scenario.play()
    // Let the last events reach the timeline before the summary.
    await clock.world.settled()
    printer.cancel()
    return scenario.report()
  }

  /// `1 s`, `0.2 s`, `2.5 s`.
  static func seconds(_ duration: Duration) -> String {
    let value = duration.seconds
    return value == value.rounded() ? "\(Int(value)) s" : String(format: "%g s", value)
  }
}
