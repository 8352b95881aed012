import AlipayBridgeServer
import AuthCoordinator
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct AlipayTokenAPIErrorTests {
  struct Row: Sendable, CustomStringConvertible {
    var name: String
    var step: ScriptedTransport.Step
    var refresh = true
    var code: AuthCoordinatorError.Code
    var transient: Bool
    var refusesRefreshToken = false
    var retryAfter: Duration? = nil
    var classification: AlipayTokenAPIError.Classification
    var description: String { name }
  }

  static func errorBody(_ code: String, _ sub: String?) -> ScriptedTransport.Step {
    let subPart = sub.map { #","sub_code":"\#($0)","sub_msg":"m RT-SECRET""# } ?? ""
    return .reply(
      status: 200, headers: [:],
      body:
        #"{"error_response":{"code":"\#(code)","msg":"Invalid Arguments"\#(subPart)},"sign":"s"}"#)
  }

  static let rows: [Row] = [
    Row(
      name: "code invalid", step: errorBody("40002", "isv.code-invalid"), refresh: false,
      code: .interactionRequired, transient: false, classification: .needsAuthorization),
    Row(
      name: "refresh token invalid", step: errorBody("40002", "isv.refresh-token-invalid"),
      code: .interactionRequired, transient: false, refusesRefreshToken: true,
      classification: .needsAuthorization),
    Row(
      name: "refresh token expired", step: errorBody("40002", "isv.refresh-token-time-out"),
      code: .interactionRequired, transient: false, refusesRefreshToken: true,
      classification: .needsAuthorization),
    Row(
      name: "refreshed token invalid", step: errorBody("40002", "isv.refreshed-token-invalid"),
      code: .interactionRequired, transient: false, refusesRefreshToken: true,
      classification: .needsAuthorization),
    Row(
      name: "invalid signature", step: errorBody("40002", "isv.invalid-signature"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "missing signature", step: errorBody("40001", "isv.missing-signature"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "invalid app id", step: errorBody("40002", "isv.invalid-app-id"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "unmatched app id", step: errorBody("40002", "isv.unmatched-app-id"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "insufficient permissions",
      step: errorBody("40006", "isv.insufficient-isv-permissions"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "grant type invalid", step: errorBody("40002", "isv.grant-type-invalid"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "business failed, unknown sub code", step: errorBody("40004", "isv.something-new"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "isp unknown error", step: errorBody("20000", "isp.unknow-error"),
      code: .alipayTokenAPIFailed, transient: true, classification: .transient),
    Row(
      name: "gateway unknown error", step: errorBody("20000", "aop.unknow-error"),
      code: .alipayTokenAPIFailed, transient: true, classification: .transient),
    Row(
      name: "20000 without sub code", step: errorBody("20000", nil),
      code: .alipayTokenAPIFailed, transient: true, classification: .transient),
    Row(
      name: "system error", step: errorBody("40004", "aop.ACQ.SYSTEM_ERROR"),
      code: .alipayTokenAPIFailed, transient: true, classification: .transient),
    Row(
      name: "HTTP 503 with Retry-After",
      step: .reply(status: 503, headers: ["Retry-After": "7"], body: "down RT-SECRET"),
      code: .alipayTokenAPIFailed, transient: true, retryAfter: .seconds(7),
      classification: .transient),
    Row(
      name: "HTTP 429", step: .reply(status: 429, headers: [:], body: ""),
      code: .alipayTokenAPIFailed, transient: true, classification: .transient),
    Row(
      name: "HTTP 404", step: .reply(status: 404, headers: [:], body: "no"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "not JSON", step: .reply(status: 200, headers: [:], body: "<html>"),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "no access token",
      step: .reply(
        status: 200, headers: [:],
        body: #"{"alipay_system_oauth_token_response":{"user_id":"2088","code":"10000"}}"#),
      code: .alipayTokenAPIFailed, transient: false, classification: .terminal),
    Row(
      name: "timeout", step: .fail(.timedOut), code: .networkError, transient: true,
      classification: .transient),
    Row(
      name: "connection refused", step: .fail(.cannotConnectToHost), code: .networkError,
      transient: true, classification: .transient),
  ]

  @Test(arguments: rows) func errorMapsAsDocumented(_ row: Row) async throws {
    let transport = ScriptedTransport([row.step])
    let api = AlipayTokenAPI(appID: testAppID, transport: transport) { _ in "SIG-SECRET" }
    do {
      if row.refresh {
        _ = try await api.refresh(refreshToken: "RT-SECRET")
      } else {
        _ = try await api.redeem(code: "RT-SECRET")
      }
      Issue.record("\(row.name): no error")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == row.code, "\(row.name)")
      #expect(error.isTransient == row.transient, "\(row.name)")
      #expect(error.refusesRefreshToken == row.refusesRefreshToken, "\(row.name)")
      if let retryAfter = row.retryAfter { #expect(error.retryAfter == retryAfter) }
      let underlying = try #require(error.underlying as? AlipayTokenAPIError)
      #expect(underlying.classification == row.classification, "\(row.name)")
      for text in ["\(error)", error.message, "\(underlying)", String(reflecting: error)] {
        #expect(!text.contains("RT-SECRET"), "\(row.name): \(text)")
        #expect(!text.contains("SIG-SECRET"), "\(row.name): \(text)")
      }
    }
  }

  @Test func unknownSubCodesAreTerminalUnlessSystemErrors() {
    #expect(AlipayTokenAPI.classify(code: "40004", subCode: "isv.new-thing") == .terminal)
    #expect(AlipayTokenAPI.classify(code: "40004", subCode: "isp.new-thing") == .transient)
    #expect(AlipayTokenAPI.classify(code: nil, subCode: nil) == .terminal)
  }

  @Test func serviceMapsErrorsToTheAppContract() async throws {
    let transport = ScriptedTransport([
      .reply(status: 503, headers: ["Retry-After": "2"], body: ""),
      Self.errorBody("40002", "isv.code-invalid"),
      Self.errorBody("40002", "isv.invalid-signature"),
    ])
    let service = AlipayTokenService(
      api: AlipayTokenAPI(appID: testAppID, transport: transport) { _ in "s" },
      scope: "auth_user",
      configuration: .init(silentRefresh: .disabled))
    func signIn(_ code: String) async -> AlipayServiceResponse {
      await service.respond(
        to: AlipayServiceRequest(
          path: "/alipay/token", headers: ["Content-Type": "application/json"],
          body: Data(#"{"auth_code":"\#(code)","mc_uid":"u1"}"#.utf8)))
    }
    let unavailable = await signIn("C1")
    #expect(unavailable.status == 503)
    #expect(unavailable.headers["Retry-After"] == "2")
    #expect(unavailable.json?["error"] as? String == "temporarily_unavailable")
    let refused = await signIn("C2")
    #expect(refused.status == 401)
    #expect(refused.json?["error"] as? String == "authorization_required")
    let terminal = await signIn("C3")
    #expect(terminal.status == 403)
    #expect(terminal.json?["error"] as? String == "refresh_refused")
    let missing = await service.respond(to: AlipayServiceRequest(path: "/alipay/refresh"))
    #expect(missing.status == 400)
    #expect(missing.json?["error"] as? String == "invalid_request")
    let unknown = await service.respond(
      to: AlipayServiceRequest(path: "/alipay/refresh", body: Data("mc_uid=nobody".utf8)))
    #expect(unknown.status == 401)
    #expect(transport.requests.count == 3)
  }
}
