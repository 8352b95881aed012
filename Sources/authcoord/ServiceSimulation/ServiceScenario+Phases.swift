import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

// The four phases of `authcoord simulate --service`, each a few lines in the timeline and a
// few checks in the summary.
extension ServiceScenario {
  /// How many times the API revokes the access tokens in the storm.
  static let revocations = 6
  /// How far apart the revocations of the storm are (all within the loop window).
  static let revocationInterval: Duration = .seconds(5)
  /// How long after the last expiry the storm begins (the token is still valid then).
  static let stormDelay: Duration = .seconds(60)

  /// Phase 1: every request at once, nothing cached: one client_credentials grant serves all.
  func coldStart() async {
    timeline.log("phase 1, cold start: \(requests) concurrent requests, no token yet")
    let wave = await wave("cold start")
    timeline.log(
      "cold start done: \(wave.tally.text); \(wave.server.tokenRequests) token request(s)")
    expect(wave.tally.served == requests, "cold start: every request served")
    expect(
      wave.server.tokenRequests == 1 && wave.server.clientCredentialsGrants == 1,
      "cold start: one token request (client_credentials)")
  }

  /// Phase 2: the clock moves to the token's expiry, again and again; each time one
  /// refresh-token grant (rotated) serves the whole wave.
  func expiries() async {
    let count = options.expiries
    timeline.log(
      "phase 2, expiries: tokens live \(ServiceSimulation.seconds(options.tokenLifetime)); the "
        + "clock moves to the token's expiry \(count) time(s), \(requests) requests each time")
    var alike = 0
    var served = 0
    var tokenRequests = 0
    for number in 1...count {
      // The first expiry in detail, the next two in a line each, the rest summed up.
      timeline.detailed = number == 1
      await advance(by: options.tokenLifetime)
      if number <= 3 {
        timeline.log("expiry \(number) of \(count): the token expired; \(requests) requests")
      }
      let wave = await wave("expiry \(number)")
      let ok =
        wave.tally.served == requests && wave.server.tokenRequests == 1
        && wave.server.refreshTokenGrants == 1 && wave.server.reuses == 0
      if ok { alike += 1 }
      if number <= 3 {
        timeline.log(
          "expiry \(number) done: \(wave.tally.text); \(wave.server.tokenRequests) token "
            + "request(s) (\(wave.server.refreshTokenGrants) refresh_token grant, rotated)")
      } else {
        served += wave.tally.served
        tokenRequests += wave.server.tokenRequests
      }
    }
    timeline.detailed = true
    if count > 3 {
      timeline.log(
        "\(count == 4 ? "expiry 4" : "expiries 4-\(count)") done: \(served) served, "
          + "\(tokenRequests) token request(s) (one refresh_token grant per expiry)")
    }
    expect(
      alike == count,
      "expiries: each wave served by exactly one refresh_token grant (\(alike) of \(count))")
  }

  /// Phase 3: the API revokes every access token 6 times, 5 s apart. Each time the whole wave
  /// gets a 401, forces a refresh of the rejected token (one refresh for all) and retries once.
  /// The loop guard lets 3 forced refreshes through in its window and delays the rest.
  func revocationStorm() async {
    await advance(by: Self.stormDelay)
    timeline.log(
      "phase 3, revocation storm: the API revokes every access token \(Self.revocations) "
        + "times, \(ServiceSimulation.seconds(Self.revocationInterval)) apart; each time "
        + "\(requests) requests get 401, force a refresh of the rejected token and retry once")
    let start = clock.now.offset
    let backOffsBefore = coordinator.statistics.refreshLoopBackoffs
    var alike = 0
    for number in 1...Self.revocations {
      await advance(to: start + Self.revocationInterval * (number - 1))
      let revoked = resource.revokeAllAccessTokens()
      timeline.log(
        "revocation \(number) of \(Self.revocations): the API revoked \(revoked) access "
          + "token(s) (refresh tokens stay valid); \(requests) requests")
      let wave = await wave("revocation \(number)")
      timeline.log(
        "revocation \(number) done: \(wave.unauthorized) got 401; \(wave.tally.text); "
          + "\(wave.server.refreshTokenGrants) refresh_token grant")
      if wave.unauthorized == requests && wave.tally.served == requests
        && wave.server.tokenRequests == 1
        && wave.server.refreshTokenGrants == 1
      {
        alike += 1
      }
    }
    expect(
      alike == Self.revocations,
      "revocations: every 401 retried once after one shared refresh (\(alike) of "
        + "\(Self.revocations))")
    let expected = expectedBackOffs
    let delays = timeline.backOffDelays
    expect(
      coordinator.statistics.refreshLoopBackoffs - backOffsBefore == expected.count
        && delays == expected,
      "loop guard: \(expected.count) back-off(s) of "
        + "\(expected.map(ServiceSimulation.seconds).joined(separator: ", "))")
  }

  /// The loop guard's delays for the storm's forced refreshes: none for the first
  /// `maxForcedAuthorizations` in the window, then `loopBackoff`, doubling up to
  /// `maxLoopBackoff`.
  var expectedBackOffs: [Duration] {
    let beyond = max(Self.revocations - configuration.maxForcedAuthorizations, 0)
    var delays: [Duration] = []
    var delay = configuration.loopBackoff
    for _ in 0..<beyond {
      delays.append(min(delay, configuration.maxLoopBackoff))
      delay *= 2
    }
    return delays
  }

  /// Phase 4: the token endpoint becomes slower than the deadline. The wave's callers fail
  /// with timed_out at the deadline; the stopped refresh is not cancelled (it spends a
  /// rotating refresh token) and its late result is stored; the next wave waits for it instead
  /// of spending that refresh token a second time; after recovery, refreshes are normal.
  func slowEndpoint() async {
    let deadline = options.authorizationTimeout
    let slow = deadline * 5 / 2
    await advance(by: options.tokenLifetime)
    tokenServer.responseDelay = slow
    timeline.log(
      "phase 4, slow endpoint: the token endpoint now answers in "
        + "\(ServiceSimulation.seconds(slow)), past the coordinator's "
        + "\(ServiceSimulation.seconds(deadline)) deadline; the token expired; \(requests) requests"
    )
    let start = clock.now.offset
    let stalled = await wave("slow endpoint")
    let waited = clock.now.offset - start
    timeline.log(
      "slow-endpoint wave done after \(ServiceSimulation.seconds(waited)): \(stalled.tally.text)")
    expect(
      stalled.tally.count(.timedOut) == requests && waited == deadline,
      "slow endpoint: every request failed with timed_out at the deadline")

    await advance(to: start + deadline * 2)
    tokenServer.responseDelay = ServiceSimulation.responseDelay
    timeline.log(
      "the endpoint recovers (it answers in \(ServiceSimulation.seconds(tokenServer.responseDelay)) "
        + "again) while the stopped refresh's answer is still on its way; \(requests) requests: "
        + "their flight waits for the stopped refresh rather than spend its refresh token again")
    let saved = coordinator.statistics.lateResultsSaved
    let adopted = coordinator.statistics.adoptedFromStore
    let waiting = await wave("after the slow wave")
    timeline.log(
      "wave done: \(waiting.tally.text); \(waiting.server.tokenRequests) token request(s): "
        + "served the stopped refresh's stored result")
    expect(
      waiting.tally.served == requests && waiting.server.tokenRequests == 0
        && coordinator.statistics.lateResultsSaved == saved + 1
        && coordinator.statistics.adoptedFromStore == adopted + 1,
      "slow endpoint: the late result was stored, then served to the next wave")

    await advance(by: options.tokenLifetime)
    timeline.log("the token expired again; \(requests) requests")
    let recovered = await wave("recovery")
    timeline.log(
      "recovery done: \(recovered.tally.text); \(recovered.server.tokenRequests) token "
        + "request(s) (\(recovered.server.refreshTokenGrants) refresh_token grant, rotated)")
    expect(
      recovered.tally.served == requests && recovered.server.refreshTokenGrants == 1,
      "recovery: one refresh_token grant serves the wave")
  }
}
