import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The service against the simulated gateway on a real loopback socket (URLSessionTransport),
/// time on a manual clock: no test sleeps.
@Suite(.timeLimit(.minutes(2))) struct AlipayTokenServiceEndToEndTests {
  /// A service served on its own loopback socket, as the integrator's endpoints.
  static func serve(_ service: AlipayTokenService) throws -> (LoopbackHTTPServer, URL) {
    let server = LoopbackHTTPServer { request in
      let response = await service.respond(to: serviceRequest(request))
      return LoopbackHTTPResponse(
        status: response.status, headers: response.headers, body: response.body)
    }
    return (server, try server.start())
  }

  @Test func signInOverHTTPThenExpiryRefreshesOnceForAThousandCallers() async throws {
    let rig = try Rig()
    let service = rig.service()
    let (server, base) = try Self.serve(service)
    defer { server.stop() }
    let code = rig.gateway.issueCode(forUser: testUser)
    let signIn = try await post(
      base.appendingPathComponent("alipay/token"), [("auth_code", code), ("mc_uid", "u1")])
    #expect(signIn.status == 200)
    #expect(signIn.json["user_id"] as? String == testUser)
    #expect(signIn.json["mc_user_id"] as? String == "u1")
    #expect((signIn.json["expires_in"] as? NSNumber)?.intValue == 3600)
    #expect(signIn.json["refresh_token"] == nil)
    let first = try #require(signIn.json["access_token"] as? String)
    #expect(rig.gateway.status(ofAccessToken: first) == .active)
    #expect(!service.pendingCodes.hasCode(for: service.key(mcUid: "u1")))

    rig.clock.advance(by: .seconds(3601))
    let models = try await withThrowingTaskGroup(of: AuthModel.self) { group in
      for _ in 0..<1000 { group.addTask { try await service.refresh(mcUid: "u1") } }
      return try await group.reduce(into: [AuthModel]()) { $0.append($1) }
    }
    #expect(models.count == 1000)
    #expect(Set(models.map(\.accessToken)).count == 1)
    #expect(rig.gateway.counters.refreshGrants == 1)
    #expect(rig.gateway.counters.codeGrants == 1)
    #expect(rig.gateway.counters.requests == 2)
    let second = try #require(models.first?.accessToken)
    #expect(second != first)
    #expect(rig.gateway.status(ofAccessToken: second) == .active)
    #expect(rig.gateway.status(ofAccessToken: first) == .revoked)

    // The app's caller rejects the token: one more rotation, and never a refresh token out.
    let refreshed = try await post(
      base.appendingPathComponent("alipay/refresh"),
      [("mc_uid", "u1"), ("rejected_access_token", second)])
    #expect(refreshed.status == 200)
    #expect(refreshed.json["access_token"] as? String != second)
    #expect(refreshed.json["refresh_token"] == nil)
    #expect(
      refreshed.json.keys.sorted() == ["access_token", "expires_in", "mc_user_id", "user_id"])
    #expect(rig.gateway.counters.refreshGrants == 2)
  }

  @Test func familyEndNeedsTheUserWithoutCallingTheGateway() async throws {
    let rig = try Rig(familyLifetime: .seconds(7200))
    let service = rig.service()
    _ = try await service.signIn(authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    rig.clock.advance(by: .seconds(7201))
    let before = rig.gateway.counters
    let response = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(response.status == 401)
    #expect(response.json?["error"] as? String == "authorization_required")
    #expect(rig.gateway.counters == before)
    await #expect(throws: AuthCoordinatorError(.interactionRequired)) {
      try await service.refresh(mcUid: "u1")
    }
    #expect(rig.gateway.counters == before)
  }

  @Test func cancelledAuthorizationAnswers401WithoutRetry() async throws {
    let rig = try Rig()
    let service = rig.service(maxAttempts: 3)
    _ = try await service.signIn(authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    rig.gateway.cancelAuthorization(ofUser: testUser)
    rig.clock.advance(by: .seconds(3601))
    let before = rig.gateway.counters.requests
    let response = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(response.status == 401)
    #expect(rig.gateway.counters.requests == before + 1)
    // The refused refresh token is never sent again.
    let again = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(again.status == 401)
    #expect(rig.gateway.counters.requests == before + 1)
    // The user authorizes again: a new family.
    let code = rig.gateway.issueCode(forUser: testUser)
    let model = try await service.signIn(authCode: code, mcUid: "u1")
    #expect(rig.gateway.status(ofAccessToken: model.accessToken) == .active)
  }

  @Test func outageAnswers503WithBoundedGatewayRequests() async throws {
    let rig = try Rig()
    let service = rig.service(maxAttempts: 3)
    _ = try await service.signIn(authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    rig.clock.advance(by: .seconds(3601))
    rig.gateway.outage = .ispUnknownError
    let before = rig.gateway.counters.requests
    let response = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(response.status == 503)
    #expect(response.json?["error"] as? String == "temporarily_unavailable")
    #expect(rig.gateway.counters.requests - before == 3)

    rig.gateway.outage = .http(status: 503, retryAfter: "7")
    let down = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(down.status == 503)
    #expect(down.headers["Retry-After"] == "7")
    #expect(rig.gateway.counters.requests - before <= 6)

    rig.gateway.outage = nil
    let back = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=u1".utf8)))
    #expect(back.status == 200)
    #expect(rig.gateway.counters.reuses == 0)
  }

  @Test func twoReplicasAlternatingThirtyRotationsNeverReuse() async throws {
    let rig = try Rig()
    let replicas = [rig.service(), rig.service()]
    _ = try await replicas[0].signIn(
      authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    var tokens: Set<String> = []
    for rotation in 0..<30 {
      rig.clock.advance(by: .seconds(3601))
      let model = try await replicas[rotation % 2].refresh(mcUid: "u1")
      #expect(rig.gateway.status(ofAccessToken: model.accessToken) == .active)
      tokens.insert(model.accessToken)
    }
    #expect(tokens.count == 30)
    #expect(rig.gateway.counters.refreshGrants == 30)
    #expect(rig.gateway.counters.reuses == 0)
    #expect(rig.gateway.counters.errors == 0)
  }

  @Test func forgedOrUnsignedRequestsAreRefusedByTheGateway() async throws {
    let rig = try Rig()
    let forger = rig.service(signer: TestSigner(key: "not-the-integrator"))
    await #expect(throws: AuthCoordinatorError(.alipayTokenAPIFailed)) {
      try await forger.signIn(authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    }
    let unsigned = AlipayTokenAPI(appID: testAppID, gateway: rig.gatewayURL) { _ in "" }
    do {
      _ = try await unsigned.redeem(code: rig.gateway.issueCode(forUser: testUser))
      Issue.record("an unsigned request was accepted")
    } catch let error as AuthCoordinatorError {
      #expect((error.underlying as? AlipayTokenAPIError)?.subCode == "isv.missing-signature")
    }
    #expect(rig.gateway.counters.invalidSignatures == 2)
    #expect(rig.gateway.counters.codeGrants == 0)
    // The integrator's own signature still works.
    let model = try await rig.service().signIn(
      authCode: rig.gateway.issueCode(forUser: testUser), mcUid: "u1")
    #expect(model.uid == testUser)
  }

  @Test func aCodeIsRedeemedOnceAndASpentCodeNeedsTheUser() async throws {
    let rig = try Rig()
    let service = rig.service()
    let code = rig.gateway.issueCode(forUser: testUser)
    _ = try await service.signIn(authCode: code, mcUid: "u1")
    let replay = await service.respond(
      to: AlipayServiceRequest(
        path: "/alipay/token", body: Data("auth_code=\(code)&mc_uid=u2".utf8)))
    #expect(replay.status == 401)
    #expect(rig.gateway.counters.codeGrants == 1)
    #expect(!service.pendingCodes.hasCode(for: service.key(mcUid: "u2")))
  }
}
