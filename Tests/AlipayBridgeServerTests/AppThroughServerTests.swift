import AlipayBridge
import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Issue 36, end to end: the app's coordinator on a `SilentFirstAuthorizer` (the real
/// `HTTPTokenRefresher`, and `AlipayAuthorizer` with the real `HTTPTokenExchanger`) talks over a
/// real socket to the integrator's server (the real `AlipayTokenService` on a loopback server),
/// which talks over a real socket to the SIMULATED Alipay gateway. Only the Alipay app is a
/// stand-in (``FakeAlipayApp``: each bounce is counted and brings back a code the gateway
/// issued).
@Suite(.timeLimit(.minutes(2))) struct AppThroughServerTests {
  /// The Alipay app, simulated: the user consents at once, and Alipay issues a code.
  struct FakeAlipayApp: AuthCodeProvider {
    let gateway: SimulatedAlipayGateway
    let bounces: LockedState<Int>

    func authCode(for request: AuthorizationRequest) async throws -> AuthCode {
      bounces.withLock { $0 += 1 }
      return AuthCode(
        gateway.issueCode(forUser: testUser), appID: testAppID, userID: testUser)
    }
  }

  /// The gateway, the integrator's server (one replica) on a loopback socket, and the app.
  final class Stack: Sendable {
    let rig: Rig
    let service: AlipayTokenService
    let server: LoopbackHTTPServer
    let bounces = LockedState(0)
    let app: AuthCoordinator
    let key = AccountKey(mcUid: "member-42")

    init(familyLifetime: Duration = .seconds(4 * 3600)) throws {
      rig = try Rig(accessTokenLifetime: .seconds(3600), familyLifetime: familyLifetime)
      let service = rig.service()
      self.service = service
      let served = try AlipayTokenServiceEndToEndTests.serve(service)
      server = served.0
      let base = served.1
      let clock = rig.clock
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
      configuration.clock = clock
      configuration.now = clock.dateSource
      configuration.random = { 0.5 }
      // One attempt per flight, a 10 s back-off step: the app's own retries would wait on the
      // manual clock.
      configuration.silentRefresh = SilentRefreshPolicy(
        refreshAhead: nil, maxAttempts: 1, retryDelay: .seconds(10), maxRetryDelay: .seconds(10))
      app = AuthCoordinator(
        authorizer: SilentFirstAuthorizer(
          // 30 s request timeouts: a loaded CI machine must not turn a slow answer into a
          // failure these tests do not test (the outage test stops the server instead).
          silent: HTTPTokenRefresher(
            endpoint: base.appendingPathComponent("alipay/refresh"), timeout: .seconds(30),
            now: clock.dateSource),
          interactive: AlipayAuthorizer(
            provider: FakeAlipayApp(gateway: rig.gateway, bounces: bounces),
            exchanger: HTTPTokenExchanger(
              endpoint: base.appendingPathComponent("alipay/token"), timeout: .seconds(30),
              now: clock.dateSource))),
        configuration: configuration)
    }

    deinit { server.stop() }

    var bounceCount: Int { bounces.withLock { $0 } }

    /// `count` concurrent opens; the distinct tokens they were served.
    func open(_ count: Int) async throws -> Set<String> {
      let app = self.app
      let key = self.key
      return try await withThrowingTaskGroup(of: String.self) { group in
        for _ in 0..<count { group.addTask { try await app.authModel(for: key).accessToken } }
        return try await group.reduce(into: Set<String>()) { $0.insert($1) }
      }
    }
  }

  @Test func oneBouncePerSignInNonePerExpiryOneAtTheFamilysEndAndOneAfterACancellation()
    async throws
  {
    let stack = try Stack()
    let gateway = stack.rig.gateway
    // Cold sign-in: the server knows nothing of the user (401), one bounce for 1,000 opens.
    let first = try await stack.open(1000)
    #expect(first.count == 1 && stack.bounceCount == 1)
    #expect(gateway.counters.codeGrants == 1)
    #expect(gateway.status(ofAccessToken: first.first!) == .active)

    // Expiry: no bounce, one gateway call for 1,000 waiting callers.
    stack.rig.clock.advance(by: .seconds(3600))
    let second = try await stack.open(1000)
    #expect(second.count == 1 && second != first)
    #expect(stack.bounceCount == 1)
    #expect(gateway.counters.refreshGrants == 1)

    // Two more expiries inside the family: silent.
    for _ in 0..<2 {
      stack.rig.clock.advance(by: .seconds(3600))
      _ = try await stack.open(10)
    }
    #expect(stack.bounceCount == 1 && gateway.counters.refreshGrants == 3)

    // The family's end (4 hours after the sign-in): one bounce, no gateway refresh attempted.
    stack.rig.clock.advance(by: .seconds(3600))
    let requestsBefore = gateway.counters.requests
    let afterEnd = try await stack.open(100)
    #expect(afterEnd.count == 1 && stack.bounceCount == 2)
    #expect(gateway.counters.requests == requestsBefore + 1, "only the new code's redemption")

    // The user cancels in Alipay; the mini-program's API rejects the token. One bounce, and
    // the refused refresh is not retried.
    gateway.cancelAuthorization(ofUser: testUser)
    let beforeCancel = gateway.counters.requests
    let rejected = try #require(afterEnd.first)
    let fresh = try await stack.app.authModel(for: stack.key, refresh: .force(rejecting: rejected))
    #expect(fresh.accessToken != rejected && stack.bounceCount == 3)
    #expect(gateway.counters.requests == beforeCancel + 2, "one refused refresh, one redemption")
    #expect(gateway.status(ofAccessToken: fresh.accessToken) == .active)
    #expect(gateway.counters.reuses == 0 && gateway.counters.invalidSignatures == 0)
  }

  @Test func anUnbindForgottenByTheServerIsNotUndoneByTheNextSilentRefresh() async throws {
    let stack = try Stack()
    let gateway = stack.rig.gateway
    _ = try await stack.open(10)
    #expect(stack.bounceCount == 1)
    // The user unbinds Alipay: the app signs the account out, and tells its server
    // (`POST /alipay/signout`, what an app's `onAccountStatusChange` sends).
    await stack.app.accountStatusChanged(.unbind(mcUid: stack.key.mcUid))
    let response = await stack.service.respond(
      to: AlipayServiceRequest(
        path: AlipayTokenService.signOutPath,
        headers: ["Content-Type": "application/x-www-form-urlencoded"],
        body: Data("mc_uid=\(stack.key.mcUid)".utf8)))
    #expect(response.status == 200)
    // The next open cannot connect the account again silently: the user is asked.
    let requests = gateway.counters.requests
    _ = try await stack.open(10)
    #expect(stack.bounceCount == 2, "the server forgot the family: the user authorizes again")
    #expect(gateway.counters.requests == requests + 1, "only the new code's redemption")
    #expect(gateway.counters.refreshGrants == 0)
  }

  @Test func outagesOfTheGatewayOrTheServerNeverBounceAndAreAskedOncePerBackOffStep()
    async throws
  {
    let stack = try Stack()
    let gateway = stack.rig.gateway
    _ = try await stack.open(10)
    #expect(stack.bounceCount == 1)

    // The gateway is down when the token expires: the server answers 503 after its own three
    // attempts, the app fails without a bounce, and the next 50 opens are answered by the
    // back-off step without a request.
    stack.rig.clock.advance(by: .seconds(3600))
    gateway.outage = .http(status: 503)
    let before = gateway.counters.requests
    for _ in 0..<51 {
      do {
        _ = try await stack.app.authModel(for: stack.key)
        Issue.record("a model while Alipay's gateway is down")
      } catch let error as AuthCoordinatorError {
        #expect(error.code == .refreshFailed && error.isTransient)
      }
    }
    #expect(stack.bounceCount == 1)
    #expect(gateway.counters.requests - before == 3, "one server flight, three attempts")

    // After the step, the gateway back: one silent refresh.
    gateway.outage = nil
    stack.rig.clock.advance(by: .seconds(10))
    _ = try await stack.open(10)
    #expect(stack.bounceCount == 1)

    // The integrator's server is gone: a transport failure, no bounce.
    stack.server.stop()
    stack.rig.clock.advance(by: .seconds(3600))
    do {
      _ = try await stack.app.authModel(for: stack.key)
      Issue.record("a model while the server is down")
    } catch let error as AuthCoordinatorError {
      #expect(error.isTransient)
    }
    #expect(stack.bounceCount == 1)
    #expect(gateway.counters.reuses == 0)
  }
}
