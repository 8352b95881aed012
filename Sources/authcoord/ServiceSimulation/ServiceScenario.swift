import AuthCoordinator
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
  private(set) var waves: [Wave] = []
  /// The checks of the run: what was expected, and whether it held.
  private(set) var checks: [(String, Bool)] = []

  init(
    options: SimulateCommand.Options, configuration: AuthCoordinator.Configuration,
    clock: VirtualClock, timeline: ServiceTimeline, tokenServer: SimulatedTokenServer,
    resource: SimulatedResourceServer, coordinator: AuthCoordinator
  ) {
    self.options = options
    self.configuration = configuration
    self.clock = clock
    self.timeline = timeline
    self.tokenServer = tokenServer
    self.resource = resource
    self.coordinator = coordinator
    self.client = ServiceRequest(
      coordinator: coordinator, resource: resource, key: ServiceSimulation.key)
  }

  /// Requests per wave.
  var requests: Int { options.requests }

  /// Plays every phase.
  func play() async {
    timeline.log(
      "a SIMULATED OAuth 2 token server and a SIMULATED API, in process; the coordinator is the "
        + "real one, with a silent authorizer (isInteractive: false) and a "
        + "\(ServiceSimulation.seconds(options.authorizationTimeout)) deadline")
    await coldStart()
    await expiries()
    await revocationStorm()
    await slowEndpoint()
    expect(tokenServer.snapshot.reuses == 0, "no refresh token was used twice")
    expect(tokenServer.snapshot.invalidGrants == 0, "the token server refused no grant")
  }

  /// Sends one wave of `requests` concurrent requests and records what happened.
  func wave(_ name: String) async -> Wave {
    let before = tokenServer.snapshot
    let unauthorizedBefore = resource.snapshot.unauthorized
    let tally = await client.wave(requests)
    await clock.world.settled()  // the flight's events reach the timeline first
    let after = tokenServer.snapshot
    let wave = Wave(
      name: name, tally: tally,
      server: SimulatedTokenServer.Counters(
        tokenRequests: after.tokenRequests - before.tokenRequests,
        clientCredentialsGrants: after.clientCredentialsGrants - before.clientCredentialsGrants,
        refreshTokenGrants: after.refreshTokenGrants - before.refreshTokenGrants,
        reuses: after.reuses - before.reuses,
        invalidGrants: after.invalidGrants - before.invalidGrants,
        familiesRevoked: after.familiesRevoked - before.familiesRevoked),
      unauthorized: resource.snapshot.unauthorized - unauthorizedBefore)
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
