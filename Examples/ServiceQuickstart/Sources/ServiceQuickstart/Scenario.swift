import AuthCoordinatorOAuth2
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The four phases, run in order on one quick-start client against one simulated server.
///
/// The slow endpoint runs before the revocation storm: its refreshes are renewals of expired
/// tokens, which the refresh-loop guard does not count, while right after the storm's six
/// forced refreshes the guard would delay the next one by 8 s.
struct Scenario {
  let server: SimulatedServerAdmin
  /// The quick start's client.
  let client: BearerClient
  /// One call of the quick start's `fetch`: its HTTP status.
  let call: @Sendable () async throws -> Int
  /// The loop guard's back-offs, from the coordinator's event stream.
  let backoffs: BackoffLog
  /// The expiry of the token the coordinator holds, read right after the latest wave.
  var expiresAt = Date.distantPast
  let start = ContinuousClock.now

  /// The demo secret the simulated server is told to require: a real one comes from the
  /// service's configuration.
  static let clientSecret = "quickstart-secret"

  init(server: SimulatedServerAdmin) async throws {
    self.server = server
    // From now on the simulated server checks the client's credentials (HTTP Basic).
    try await server.configure([
      "client_id": "reports-service", "client_secret": Self.clientSecret, "expires_in": "3600",
      "delay": "0",
    ])
    let client = makeReportsClient(
      tokenEndpoint: server.tokenEndpoint, api: server.resource, clientSecret: Self.clientSecret)
    let resource = server.resource
    self.client = client
    call = { try await fetch(resource, with: client).1.statusCode }
    backoffs = BackoffLog(client.coordinator)
  }

  // MARK: - The phases

  /// 1. A cold start: 2,000 calls at once share one client-credentials grant.
  func coldStart() async throws {
    let before = try await server.stats()
    let calls = await wave(2_000, of: call)
    let after = try await server.stats()
    let requests = after.tokenRequests - before.tokenRequests
    var expectations = Expectations()
    expectations.expect(calls.all(.status(200)), "2000 × 200, got \(calls.tally)")
    expectations.expect(requests == 1, "1 token request, got \(requests)")
    expectations.expect(
      after.clientCredentialsGrants - before.clientCredentialsGrants == 1,
      "1 client-credentials grant")
    expectations.expect(after.invalidClients == 0, "0 refused client authentications")
    report(
      "[1/4] cold start:",
      "2000 concurrent calls: \(calls.tally) in \(seconds(calls.seconds)); "
        + "token requests: \(requests) (client-credentials grant)", expectations)
  }

  /// 2. 100 expiries: tokens that live 2 s, so that with the 1 s `refreshLeeway` each is renewed
  /// 1 s after it was issued. Each round waits until the token expired, then sends 50 calls at
  /// once: one refresh-token grant per round, each spending the refresh token the previous one
  /// returned (the server revokes the family if a spent one comes back).
  mutating func expiries() async throws {
    try await server.configure(["expires_in": "2"])
    // One forced refresh, so that the coordinator holds a token of the new lifetime.
    _ = try await client.coordinator.authModel(for: client.key, refresh: .force(rejecting: nil))
    expiresAt = try await currentExpiry()
    let first = try await server.stats()
    let clock = ContinuousClock()
    let start = clock.now
    var previous = first
    var oddRounds: [String] = []
    var calls = 0
    var failedCalls = 0
    for round in 1...100 {
      try await sleepUntilExpired()
      let roundCalls = await wave(50, of: call)
      expiresAt = try await currentExpiry()
      let stats = try await server.stats()
      calls += roundCalls.calls.count
      failedCalls += roundCalls.calls.count - roundCalls.count(.status(200))
      let refreshes = stats.refreshes - previous.refreshes
      let requests = stats.tokenRequests - previous.tokenRequests
      if refreshes != 1 || requests != 1 {
        oddRounds.append("round \(round): \(requests) token requests, \(refreshes) refreshes")
      }
      previous = stats
    }
    let elapsed = clock.now - start
    let refreshes = previous.refreshes - first.refreshes
    var expectations = Expectations()
    expectations.expect(oddRounds.isEmpty, "1 refresh in each round: \(oddRounds.prefix(5))")
    expectations.expect(failedCalls == 0, "0 failed calls, got \(failedCalls)")
    expectations.expect(refreshes == 100, "100 refreshes, got \(refreshes)")
    expectations.expect(previous.reuses == 0, "0 refresh-token reuses, got \(previous.reuses)")
    expectations.expect(
      previous.revokedFamilies == 0, "0 revoked families, got \(previous.revokedFamilies)")
    expectations.expect(
      previous.clientCredentialsGrants == first.clientCredentialsGrants, "no new token family")
    report(
      "[2/4] 100 expiries:",
      "\(100 - oddRounds.count)/100 rounds of 50 calls with exactly 1 refresh; "
        + "\(calls - failedCalls)/\(calls) calls 200; refreshes: \(refreshes), "
        + "reuses: \(previous.reuses), revoked families: \(previous.revokedFamilies); "
        + "in \(seconds(elapsed.inSeconds))", expectations)
  }

  /// 3. A slow token endpoint. Beyond the 2 s `authorizationTimeout` (3 s): the calls fail with
  /// `timed_out` after 2 s, and the refresh goes on; its late result is stored, and the next
  /// wave, sent at once with the endpoint fast again, waits for it and adopts it: no second
  /// refresh, no reuse. Within the deadline (1 s): the calls wait for one refresh and succeed.
  /// Tokens live 6 s here: `expires_in` counts from the moment the request was sent, so a
  /// 2 s token that took 3 s to arrive would be expired on arrival.
  mutating func slowEndpoint() async throws {
    try await sleepUntilExpired()
    try await server.configure(["expires_in": "6"])
    let before = try await server.stats()
    let statisticsBefore = client.coordinator.statistics
    try await server.configure(["delay": "3"])
    let slow = await wave(200, of: call)
    try await server.configure(["delay": "0"])
    let next = await wave(200, of: call)
    expiresAt = try await currentExpiry()
    let middle = try await server.stats()
    let statisticsAfter = client.coordinator.statistics
    try await sleepUntilExpired()
    try await server.configure(["delay": "1"])
    let withinDeadline = await wave(200, of: call)
    try await server.configure(["delay": "0"])
    expiresAt = try await currentExpiry()
    let after = try await server.stats()

    let lateRequests = middle.tokenRequests - before.tokenRequests
    let slowRequests = after.tokenRequests - middle.tokenRequests
    var expectations = Expectations()
    expectations.expect(slow.all(.error("timed_out")), "200 × timed_out, got \(slow.tally)")
    expectations.expect(
      slow.longest < 2.5 && slow.shortest > 1.8,
      "each timed_out call waited about 2 s, got \(seconds(slow.shortest))"
        + " to \(seconds(slow.longest))")
    expectations.expect(next.all(.status(200)), "200 × 200 once fast again, got \(next.tally)")
    expectations.expect(
      lateRequests == 1 && middle.refreshes - before.refreshes == 1,
      "1 token request (the late refresh) for both waves, got \(lateRequests)")
    expectations.expect(
      statisticsAfter.lateResultsSaved - statisticsBefore.lateResultsSaved == 1,
      "the late result saved")
    expectations.expect(
      withinDeadline.all(.status(200)), "200 × 200 with a 1 s endpoint, got \(withinDeadline.tally)"
    )
    expectations.expect(slowRequests == 1, "1 token request with a 1 s endpoint")
    expectations.expect(after.reuses == 0, "0 refresh-token reuses, got \(after.reuses)")
    expectations.expect(after.revokedFamilies == 0, "0 revoked families")
    report(
      "[3/4] slow endpoint:",
      "3 s > 2 s deadline: \(slow.tally), longest wait \(seconds(slow.longest)); "
        + "fast again: \(next.tally) in \(seconds(next.seconds)), adopting the late refresh "
        + "(token requests for both waves: \(lateRequests)); 1 s endpoint: \(withinDeadline.tally)"
        + " in \(seconds(withinDeadline.seconds)), token requests: \(slowRequests); "
        + "reuses: \(after.reuses)", expectations)
  }

  /// 4. A revocation storm: 6 waves of 2,000 calls at once, each with one revocation of every
  /// access token (a key rotation at the resource server) once 200 of its calls succeeded. The
  /// calls in flight get a 401 and the client asks for a refresh: one per wave, however many
  /// 401s. From the 4th forced refresh within 60 s, the loop guard delays the refresh (1, 2,
  /// 4 s) instead of failing the callers: they wait, and every call ends 200.
  mutating func revocationStorm() async throws {
    try await server.configure(["expires_in": "3600"])
    try await sleepUntilExpired()
    _ = try await fetch(server.resource, with: client)  // a refresh to a token that lasts
    let before = try await server.stats()
    let backoffsBefore = backoffs.recorded.count
    let server = server
    var waves: [Wave] = []
    var previous = before
    var oddWaves: [String] = []
    for number in 1...6 {
      let successes = SharedCounter()
      let calls = await wave(2_000, of: call) { status in
        if status == 200, successes.increment() == 200 { try await server.revokeAccessTokens() }
      }
      let stats = try await server.stats()
      let requests = stats.tokenRequests - previous.tokenRequests
      let refreshes = stats.refreshes - previous.refreshes
      if requests != 1 || refreshes != 1 {
        oddWaves.append("wave \(number): \(requests) token requests, \(refreshes) refreshes")
      }
      waves.append(calls)
      previous = stats
    }
    let after = previous
    let delays = Array(backoffs.recorded.dropFirst(backoffsBefore))
    let succeeded = waves.map { $0.count(.status(200)) }.reduce(0, +)
    let unauthorized = after.resourceUnauthorized - before.resourceUnauthorized
    let refreshes = after.refreshes - before.refreshes
    var expectations = Expectations()
    expectations.expect(succeeded == 12_000, "12000 × 200, got \(waves.map(\.tally))")
    expectations.expect(oddWaves.isEmpty, "1 refresh per wave: \(oddWaves)")
    expectations.expect(refreshes == 6, "6 refreshes, got \(refreshes)")
    expectations.expect(
      after.accessRevocations - before.accessRevocations == 6, "6 revocations")
    expectations.expect(unauthorized > 0, "401s for the calls in flight at the revocations")
    expectations.expect(after.reuses == 0, "0 refresh-token reuses, got \(after.reuses)")
    expectations.expect(after.revokedFamilies == 0, "0 revoked families")
    expectations.expect(
      delays == [.seconds(1), .seconds(2), .seconds(4)],
      "the loop guard's back-offs 1, 2, 4 s, got \(delays)")
    report(
      "[4/4] revocation storm:",
      "6 waves × 2000 calls, 1 revocation each: \(succeeded)/12000 calls 200 (\(unauthorized) "
        + "got a 401 first, retried once); refreshes: \(refreshes), reuses: \(after.reuses); "
        + "loop-guard back-offs: \(delays.map { seconds($0.inSeconds) }.joined(separator: ", "));"
        + " waves: \(waves.map { seconds($0.seconds) }.joined(separator: ", "))", expectations)
  }

  /// The server's totals and the run's wall time.
  func summary() async throws {
    let stats = try await server.stats()
    print(
      "all phases ok in \(seconds((ContinuousClock.now - start).inSeconds)): "
        + "\(stats.tokenRequests) token requests (\(stats.clientCredentialsGrants) grant, "
        + "\(stats.refreshes) refreshes), \(stats.reuses) reuses, "
        + "\(stats.revokedFamilies) revoked families")
  }

  // MARK: - Helpers

  /// The expiry of the token the coordinator holds: a cache hit, asked right after a wave,
  /// while the token is fresh.
  func currentExpiry() async throws -> Date {
    guard let expiresAt = try await client.coordinator.authModel(for: client.key).expiresAt
    else { throw ScenarioFailure("the token has no expiry") }
    return expiresAt
  }

  /// Sleeps until the coordinator counts the token as expired: the quick start's
  /// `refreshLeeway` (1 s) before its `expiresAt`, and 0.1 s more (the leeway of a 2 s token
  /// is at most half the lifetime it arrived with, a little under 1 s).
  func sleepUntilExpired() async throws {
    let wait = expiresAt.addingTimeInterval(-0.9).timeIntervalSinceNow
    if wait > 0 { try await Task.sleep(for: .seconds(wait)) }
  }
}

/// The expectations of one phase.
struct Expectations {
  private(set) var failures: [String] = []

  /// Records `what` as failed unless `condition` holds.
  mutating func expect(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { failures.append(what()) }
  }
}

/// Prints the phase's line, then each failed expectation; exits 1 if any failed.
func report(_ phase: String, _ line: String, _ expectations: Expectations) {
  print("\(phase) \(line) -- \(expectations.failures.isEmpty ? "ok" : "FAILED")")
  guard expectations.failures.isEmpty else {
    for failure in expectations.failures { print("  expected: \(failure)") }
    exit(1)
  }
}
