import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation

/// The phases of the service demo and what each is expected to show. Used by one task only.
final class ServiceScenario {
  /// One wave of concurrent requests, with what the servers saw meanwhile.
  struct Wave {
    let name: String
    let tally: ServiceTally
    /// The token server's counters, counted during the wave.
    let server: SimulatedTokenServer.Counters
    /// The API's 401 answers during the wave.
    let unauthorized: Int
  }

  let options: SimulateCommand.Options
  let configuration: AuthCoordinator.Configuration
  let clock: VirtualClock
  let timeline: ServiceTimeline
  let tokenServer: SimulatedTokenServer
  let resource: SimulatedResourceServer
  let coordinator: AuthCoordinator
  let client: ServiceRequest

  /// Every wave, in order.
  var waves: [Wave] = []
  /// What phase 6 saw: token requests per audience, revocations at the sign-out.
  var audienceRequests: [String: Int] = [:]
  var signOutRevocations = 0
  /// The checks of the run: what was expected, and whether it held.
  private(set) var checks: [(String, Bool)] = []

  init(
    options: SimulateCommand.Options, configuration: AuthCoordinator.Configuration,
    clock: VirtualClock, timeline: ServiceTimeline, tokenServer: SimulatedTokenServer,
    resource: SimulatedResourceServer, coordinator: AuthCoordinator, client: BearerClient
  ) {
    self.options = options
    self.configuration = configuration
    self.clock = clock
    self.timeline = timeline
    self.tokenServer = tokenServer
    self.resource = resource
    self.coordinator = coordinator
    self.client = ServiceRequest(client: client)
  }

  /// Requests per wave.
  var requests: Int { options.requests }

  /// Plays every phase.
  func play() async {
    timeline.log(
      "a SIMULATED OAuth 2 token server and a SIMULATED API, in process; the coordinator, the "
        + "OAuth2Authorizer (silent: isInteractive false) and the BearerClient are the real ones, "
        + "with a "
        + "\(ServiceSimulation.seconds(options.authorizationTimeout)) deadline")
    await coldStart()
    await expiries()
    await revocationStorm()
    await slowEndpoint()
    await flakyServer()
    await audiencesAndSignOut()
    expect(tokenServer.counters.reuses == 0, "no refresh token was used twice")
    expect(tokenServer.counters.invalidGrants == 0, "the token server refused no grant")
  }

  /// Sends one wave of `requests` concurrent requests and records what happened.
  func wave(_ name: String) async -> Wave {
    let before = tokenServer.counters
    let unauthorizedBefore = resource.counters.unauthorized
    let tally = await client.wave(requests)
    await clock.world.settled()  // the flight's events reach the timeline first
    let after = tokenServer.counters
    let wave = Wave(
      name: name, tally: tally,
      server: after.since(before),
      unauthorized: resource.counters.unauthorized - unauthorizedBefore)
    waves.append(wave)
    return wave
  }

  /// Records a check of the run.
  func expect(_ holds: Bool, _ what: String) {
    checks.append((what, holds))
  }

  /// Moves the virtual clock by `duration` (every sleeper due meanwhile wakes on the way).
  func advance(by duration: Duration) async {
    try? await clock.sleep(for: duration)
  }

  /// Moves the virtual clock to `offset` from the start of the run.
  func advance(to offset: Duration) async {
    try? await clock.sleep(until: VirtualClock.Instant(offset: offset), tolerance: nil)
  }

  var asExpected: Bool { !checks.contains { !$0.1 } }
}
