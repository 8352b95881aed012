import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

// Phase 5 of `authcoord simulate --service`: the silent-refresh policy on a bad day.
extension ServiceScenario {
  /// Phase 5: a flaky token server. A wave inside the advisory window is served from memory at
  /// once while one background flight refreshes ahead. In the next window the server is down
  /// (503): the background refresh retries with back-off, and the callers never notice. In the
  /// leeway, still down and asking for 2 minutes: stale-if-error serves the unexpired token.
  /// Back up, after its Retry-After: one refresh serves the wave.
  func flakyServer() async {
    guard case let policy = configuration.silentRefresh,
      let window = policy.window(forLifetime: options.tokenLifetime),
      window / 2 > configuration.refreshLeeway + .seconds(10)
    else {
      timeline.log("phase 5, flaky server: skipped (the token lifetime leaves no advisory window)")
      return
    }
    // The refresh ahead is due between the whole window and half of it before expiry.
    let lead = window / 2 - .seconds(10)
    timeline.log(
      "phase 5, flaky server: the refresh-ahead window is \(ServiceSimulation.seconds(window)) "
        + "before expiry (jittered to its last half), the leeway "
        + "\(ServiceSimulation.seconds(configuration.refreshLeeway)); stale-if-error is on")

    // (a) Inside the window, the server up: served at once, refreshed in the background.
    await advance(to: await expiry(), minus: lead)
    let aheadBefore = coordinator.statistics.refreshesAhead
    timeline.log(
      "the token has \(ServiceSimulation.seconds(lead)) left: inside the window; "
        + "\(requests) requests")
    let start = clock.now.offset
    let ahead = await wave("refresh ahead")
    let waited = clock.now.offset - start
    let before = tokenServer.counters
    await advance(by: .seconds(1))
    let background = tokenServer.counters.since(before)
    timeline.log(
      "refresh-ahead wave done in \(ServiceSimulation.seconds(waited)) of virtual time: "
        + "\(ahead.tally.text); the background refresh made \(background.tokenRequests + ahead.server.tokenRequests) token request(s)"
    )
    expect(
      ahead.tally.served == requests && waited == .zero
        && coordinator.statistics.refreshesAhead == aheadBefore + 1
        && ahead.server.tokenRequests + background.tokenRequests == 1,
      "flaky server: a wave in the window served at once, one background refresh")

    // (b) The next window, the server down: the background refresh retries; nobody waits.
    let expiry = await expiry()
    await advance(to: expiry, minus: lead)
    tokenServer.outage = .init(status: 503)
    let retriesBefore = coordinator.statistics.retriesScheduled
    timeline.log(
      "the token server is down (503); the token has \(ServiceSimulation.seconds(lead)) left; "
        + "\(requests) requests")
    let down = await wave("window, server down")
    await advance(by: .seconds(10))
    let retries = coordinator.statistics.retriesScheduled - retriesBefore
    timeline.log(
      "wave done: \(down.tally.text); the background refresh retried \(retries) time(s), "
        + "within its deadline, then the key cooled down")
    // As many retries as the attempts and the flight's deadline allow.
    expect(
      down.tally.served == requests && retries >= 1 && retries < policy.maxAttempts,
      "flaky server: a failing background refresh retried with back-off, callers served")

    // (c) The leeway, still down: stale-if-error.
    await advance(to: expiry, minus: configuration.refreshLeeway / 2)
    tokenServer.outage = .init(status: 503, retryAfter: "120")
    let staleBefore = coordinator.statistics.staleServed
    timeline.log(
      "the token has \(ServiceSimulation.seconds(configuration.refreshLeeway / 2)) left: inside "
        + "the leeway; the server is still down and asks for 120 s; \(requests) requests")
    let stale = await wave("leeway, server down")
    let staleServed = coordinator.statistics.staleServed - staleBefore
    timeline.log(
      "wave done: \(stale.tally.text); \(staleServed) got the cached token, not yet expired "
        + "(stale-if-error); \(stale.server.tokenRequests) token request(s)")
    expect(
      stale.tally.served == requests && staleServed == requests
        && stale.server.tokenRequests == 1,
      "flaky server: stale-if-error served the unexpired token, one token request")

    // (d) Back up; after the 120 s it asked for, one refresh.
    tokenServer.outage = nil
    await advance(by: .seconds(121))
    timeline.log("the server is back; its Retry-After is over; \(requests) requests")
    let back = await wave("server back")
    timeline.log(
      "wave done: \(back.tally.text); \(back.server.tokenRequests) token request(s) "
        + "(\(back.server.refreshTokenGrants) refresh_token grant)")
    expect(
      back.tally.served == requests && back.server.tokenRequests == 1
        && back.server.refreshTokenGrants == 1,
      "flaky server: back up, one refresh serves the wave")
  }

  /// The cached token's expiry (read while no refresh ahead is due: a read is a request).
  private func expiry() async -> Date {
    (try? await coordinator.authModel(for: ServiceSimulation.key))?.expiresAt ?? timeline.date
  }

  /// Moves the clock to `lead` before `expiry`.
  private func advance(to expiry: Date, minus lead: Duration) async {
    let left = expiry.timeIntervalSince(timeline.date) - lead.seconds
    if left > 0 { await advance(by: .milliseconds(Int64(left * 1000))) }
  }
}
