import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A sign-in that arrives while a refresh of the same user is already calling Alipay.
@Suite(.timeLimit(.minutes(1))) struct SignInDuringARefreshTests {
  /// The SIMULATED gateway in process, holding the first refresh until the test releases it.
  final class GatedGateway: HTTPTransport, @unchecked Sendable {
    let gateway: SimulatedAlipayGateway
    private let lock = NSLock()
    private var held: CheckedContinuation<Void, Never>?
    private var holding = true
    private var arrived: CheckedContinuation<Void, Never>?
    private var didArrive = false

    init(_ gateway: SimulatedAlipayGateway) { self.gateway = gateway }

    func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
      let body = String(decoding: request.urlRequest.httpBody ?? Data(), as: UTF8.self)
      if body.contains("grant_type=refresh_token") {
        await withCheckedContinuation { continuation in
          let (hold, waiter) = lock.withLock { () -> (Bool, CheckedContinuation<Void, Never>?) in
            didArrive = true
            defer { arrived = nil }
            guard holding else { return (false, arrived) }
            held = continuation
            return (true, arrived)
          }
          waiter?.resume()
          if !hold { continuation.resume() }
        }
      }
      return try await gateway.send(request)
    }

    func refreshArrived() async {
      await withCheckedContinuation { continuation in
        let ready = lock.withLock { () -> Bool in
          if didArrive { return true }
          arrived = continuation
          return false
        }
        if ready { continuation.resume() }
      }
    }

    func release() {
      let waiting = lock.withLock { () -> CheckedContinuation<Void, Never>? in
        holding = false
        defer { held = nil }
        return held
      }
      waiting?.resume()
    }
  }

  @Test func theCodeTheUserBroughtBackStartsTheNewFamilyEvenIfARefreshWasCallingAlipay()
    async throws
  {
    let clock = ManualClock()
    let gateway = SimulatedAlipayGateway(
      appID: testAppID, date: clock.dateSource, verifier: testSigner.verify)
    let gated = GatedGateway(gateway)
    let service = AlipayTokenService(
      api: AlipayTokenAPI(
        appID: testAppID, transport: gated, now: clock.dateSource
      ) { testSigner.sign($0) },
      scope: "auth_user",
      configuration: AuthCoordinator.Configuration(
        silentRefresh: SilentRefreshPolicy(refreshAhead: nil, maxAttempts: 1),
        now: clock.dateSource))
    let first = try await service.signIn(
      authCode: gateway.issueCode(forUser: testUser), mcUid: "u1")
    clock.advance(by: .seconds(3601))
    let refresh = Task { try await service.refresh(mcUid: "u1") }
    await gated.refreshArrived()
    // The user authorizes again (another device, a new consent) while that refresh waits.
    let secondCode = gateway.issueCode(forUser: testUser)
    let signIn = Task { try await service.signIn(authCode: secondCode, mcUid: "u1") }
    while !service.pendingCodes.holds(secondCode, for: service.key(mcUid: "u1")) {
      await Task.yield()
    }
    gated.release()
    let refreshed = try await refresh.value
    let signedIn = try await signIn.value
    #expect(refreshed.accessToken != first.accessToken)
    #expect(gateway.counters.codeGrants == 2, "the second code was redeemed")
    #expect(signedIn.accessToken != refreshed.accessToken)
    #expect(gateway.status(ofAccessToken: signedIn.accessToken) == .active)
    #expect(!service.pendingCodes.hasCode(for: service.key(mcUid: "u1")))
    #expect(gateway.counters.reuses == 0)
  }
}
