import AlipayBridge
import AuthCoordinator
import Foundation

// The default run's second half: the Alipay token's life with a silent refresh at the
// integrator's server (issue 36). Expiries cost no bounce; the refresh family's end costs one;
// a cancellation in Alipay costs one; an outage of the integrator's server costs none.
extension Simulation {
  /// The app's authorizer: the integrator's server first (silently), Alipay only when the
  /// server says the user must authorize.
  static func authorizer(
    provider: AlipayAuthCodeProvider, server: SimulatedIntegratorServer
  ) -> SilentFirstAuthorizer {
    SilentFirstAuthorizer(
      silent: server.refresher,
      interactive: AlipayAuthorizer(provider: provider, exchanger: server.exchanger))
  }

  /// The Alipay user the simulated Alipay app signs in for the host app's user `user-N`: a
  /// 16-digit id starting 2088.
  static func alipayUser(_ mcUid: String?) -> String {
    let number = mcUid.flatMap { Int($0.split(separator: "-").last ?? "") } ?? 1
    let digits = String(number)
    return "2088" + String(repeating: "0", count: max(0, 12 - digits.count)) + digits
  }

  /// Plays the phases after the first expiry and adds their checks to `expectations`.
  ///
  /// - Returns: The last phase (a NeedRefreshToken per user, not a wave of opens) and its
  ///   bounces, for the summary.
  func silentStory(
    server: SimulatedIntegratorServer, alipay: SimulatedAlipayApp, coordinator: AuthCoordinator,
    users: [AccountKey], clock: VirtualClock, timeline: Timeline,
    expectations: inout [Bool], playWave: (String) async -> Tally
  ) async -> (Tally, bounces: Int) {
    let perWave = options.opens * users.count
    // Two more token lifetimes: each expiry refreshed silently.
    for lifetime in 3...4 {
      try? await clock.sleep(for: options.tokenLifetime)
      timeline.log("the tokens expired again (lifetime \(lifetime)); \(perWave) opens")
      let bouncesBefore = alipay.bounces
      let wave = await playWave("after expiry \(lifetime - 1)")
      timeline.log("done: \(wave.text)")
      expectations.append(wave.served == perWave && alipay.bounces == bouncesBefore)
    }

    // The integrator's server is down when the tokens expire: no bounce (the exchange after
    // one would go through the same server), and one request per back-off step.
    try? await clock.sleep(for: options.tokenLifetime)
    server.isDown = true
    timeline.log("the integrator's server is down as the tokens expire; \(perWave) opens")
    let bouncesBefore = alipay.bounces
    let down = await playWave("server down")
    let requestsDuringOutage = server.requestsWhileDown
    timeline.log(
      "done: \(down.text) (\(requestsDuringOutage) request(s) reached the dead server)")
    try? await clock.sleep(for: .seconds(1))
    let again = await playWave("server still down, 1 s later")
    timeline.log("done: \(again.text) (no new request: the back-off step answered)")
    expectations.append(
      down.served == 0 && again.served == 0 && alipay.bounces == bouncesBefore
        && server.requestsWhileDown == requestsDuringOutage
        && requestsDuringOutage <= 3 * users.count)
    server.isDown = false
    try? await clock.sleep(for: .seconds(30))
    timeline.log("the server is back; \(perWave) opens")
    let back = await playWave("server back")
    timeline.log("done: \(back.text)")
    expectations.append(back.served == perWave && alipay.bounces == bouncesBefore)

    // Past the refresh family's end (five lifetimes after the sign-in): one bounce per user.
    try? await clock.sleep(for: options.tokenLifetime)
    timeline.log("the refresh family ended; the tokens expired; \(perWave) opens")
    let ended = await playWave("family ended")
    timeline.log("done: \(ended.text)")
    expectations.append(
      ended.served == perWave && alipay.bounces == bouncesBefore + users.count)

    // The user cancels the authorization in Alipay: the token dies inside its lifetime, the
    // mini-program's API rejects it, the container says NeedRefreshToken. One bounce per user.
    for user in users {
      server.gateway.cancelAuthorization(ofUser: Self.alipayUser(user.mcUid))
    }
    timeline.log(
      "the user cancels the authorization in Alipay; the container says NeedRefreshToken")
    let beforeCancellation = alipay.bounces
    var cancelled = Tally()
    for user in users {
      let result = await Result {
        try await coordinator.authModel(for: user, extendParams: ["NeedRefreshToken": "YES"])
      }
      cancelled.add(result)
    }
    timeline.log("done: \(cancelled.text)")
    expectations.append(
      cancelled.served == users.count && alipay.bounces == beforeCancellation + users.count)
    return (cancelled, alipay.bounces - beforeCancellation)
  }
}
