import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

// SIMULATED TOKEN SERVER, REAL PRODUCTS, VIRTUAL TIME (issue 24, item 4): a token server whose
// clock is 10 minutes off this process's. Its `Date` header feeds the coordinator's estimate
// of the offset; an absolute `expires_at` (on the server's clock) is corrected with it, and a
// relative `expires_in` counts from the request on this clock, whatever the server's says.
@Suite(.timeLimit(.minutes(2))) struct ServerClockSkewTests {
  let clock = ManualClock()
  let key = AccountKey(account: "reports")

  func setUp(skew seconds: TimeInterval, absolute: Bool, responseDelay: Duration = .zero)
    -> (SimulatedTokenServer, AuthCoordinator)
  {
    let clock = self.clock
    let server = SimulatedTokenServer(
      clock: clock, responseDelay: responseDelay, tokenLifetime: .seconds(3600),
      date: { clock.date.addingTimeInterval(seconds) })
    server.statesAbsoluteExpiry = absolute
    let authorizer = OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://auth.example.test/token")!, clientID: "reports",
      transport: server, now: clock.dateSource)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configuration.silentRefresh = .disabled
    return (server, AuthCoordinator(authorizer: authorizer, configuration: configuration))
  }

  @Test(arguments: [600.0, -600.0])
  func anAbsoluteExpiryOnASkewedClockIsCorrectedAndRenewedOnTime(skew: TimeInterval)
    async throws
  {
    let (server, coordinator) = setUp(skew: skew, absolute: true)
    let issued = clock.date
    let model = try await coordinator.authModel(for: key)
    // The token lives an hour on either clock: on this one it expires 3600 s from now, not
    // 3600 s plus (or minus) the skew.
    #expect(model.expiresAt == issued.addingTimeInterval(3600))
    #expect(coordinator.statistics.serverClockOffset == .seconds(skew))
    // Served until the leeway (60 s) of its real expiry, renewed then, and not before.
    clock.advance(by: .seconds(3539))
    #expect(try await coordinator.authModel(for: key) == model)
    #expect(server.counters.tokenRequests == 1)
    clock.advance(by: .seconds(2))
    #expect(try await coordinator.authModel(for: key) != model)
    #expect(server.counters.tokenRequests == 2)
  }

  @Test func aRelativeExpiryCountsFromTheRequestOnThisClock() async throws {
    let (_, coordinator) = setUp(skew: 600, absolute: false, responseDelay: .seconds(2))
    let sent = clock.date
    let call = Task { [key] in try await coordinator.authModel(for: key) }
    // The coordinator's deadline scheduler and the server's answer.
    await clock.waitForSleepers(2)
    clock.advance(by: .seconds(2))
    let model = try await call.value
    // From the request: not 2 s later (when the answer came), not 10 min off (the server's).
    #expect(model.expiresAt == sent.addingTimeInterval(3600))
    #expect(coordinator.statistics.serverClockOffset == .seconds(600))
  }

  @Test func theEstimateIsTheMedianOfTheLastFiveReportsAndIgnoresABrokenClock() {
    let request = AuthorizationRequest(key: key, reason: .missing, requestID: "1")
    let local = Date(timeIntervalSince1970: 1_800_000_000)
    #expect(request.serverClockOffset == nil)
    #expect(request.localDate(forServerDate: local) == local, "no estimate: unchanged")
    for offset in [10.0, 12, 600, 11, 13] {
      request.noteServerDate(local.addingTimeInterval(offset), at: local)
    }
    // One wild report does not move it: the median of 10, 12, 600, 11, 13 is 12.
    #expect(request.serverClockOffset == .seconds(12))
    // A Date header days off is broken, not skewed: ignored.
    request.noteServerDate(local.addingTimeInterval(3 * 86_400), at: local)
    #expect(request.serverClockOffset == .seconds(12))
    #expect(
      request.localDate(forServerDate: local.addingTimeInterval(112))
        == local.addingTimeInterval(100))
  }
}
