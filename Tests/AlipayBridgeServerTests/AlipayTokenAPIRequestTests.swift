import AlipayBridgeServer
import AuthCoordinator
import Foundation
import Testing

@Suite(.timeLimit(.minutes(1))) struct AlipayTokenAPIRequestTests {
  static let sentAt = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15 08:00:00 UTC

  static let okBody = """
    {"alipay_system_oauth_token_response":{"user_id":2088000000000001,"access_token":"AT-1",\
    "expires_in":"3600","refresh_token":"RT-1","re_expires_in":2592000},"sign":"x"}
    """

  @Test func signContentSortsSkipsEmptyValuesAndSign() {
    let content = AlipayTokenAPI.signContent([
      "timestamp": "2027-01-15 16:00:00", "app_id": "2021", "sign": "SIG", "biz": "",
      "Zed": "upper", "charset": "utf-8", "code": "a&b=c",
    ])
    #expect(
      content == "Zed=upper&app_id=2021&charset=utf-8&code=a&b=c&timestamp=2027-01-15 16:00:00")
  }

  @Test func timestampIsBeijingTime() {
    #expect(AlipayTokenAPI.timestamp(Self.sentAt) == "2027-01-15 16:00:00")
    // 16:30:05 UTC is already the next day in GMT+8.
    let late = Date(timeIntervalSince1970: 1_800_000_000 + 8 * 3600 + 30 * 60 + 5)
    #expect(AlipayTokenAPI.timestamp(late) == "2027-01-16 00:30:05")
  }

  @Test func requestCarriesExactlyTheDocumentedParametersSigned() async throws {
    let transport = ScriptedTransport([.reply(status: 200, headers: [:], body: Self.okBody)])
    let signed = LockedBox<[String]>([])
    let api = AlipayTokenAPI(
      appID: testAppID, transport: transport, now: { Self.sentAt },
      signer: { content in
        signed.mutate { $0.append(content) }
        return "SIGNATURE+/="
      })
    let grant = try await api.redeem(code: "CODE-1")
    let expected =
      "app_id=2021000000000001&charset=utf-8&code=CODE-1&format=JSON"
      + "&grant_type=authorization_code&method=alipay.system.oauth.token&sign_type=RSA2"
      + "&timestamp=2027-01-15 16:00:00&version=1.0"
    #expect(signed.value == [expected])
    let request = try #require(transport.requests.first)
    #expect(request.httpMethod == "POST")
    #expect(request.url == AlipayTokenAPI.productionGateway)
    #expect(
      request.value(forHTTPHeaderField: "Content-Type")?.hasPrefix(
        "application/x-www-form-urlencoded") == true)
    let fields = formFields(request.httpBody)
    #expect(fields["sign"] == "SIGNATURE+/=")
    #expect(AlipayTokenAPI.signContent(fields) == expected)
    #expect(grant.userID == "2088000000000001")
    #expect(grant.accessToken == "AT-1")
    #expect(grant.refreshToken == "RT-1")
    #expect(grant.expiresAt == Self.sentAt.addingTimeInterval(3600))
    #expect(grant.refreshExpiresAt == Self.sentAt.addingTimeInterval(2_592_000))
    #expect(!"\(grant)".contains("AT-1") && !"\(grant)".contains("RT-1"))
  }

  @Test func refreshSendsTheRefreshTokenGrant() async throws {
    let transport = ScriptedTransport([.reply(status: 200, headers: [:], body: Self.okBody)])
    let api = AlipayTokenAPI(
      appID: testAppID, transport: transport, now: { Self.sentAt },
      signer: { testSigner.sign($0) })
    _ = try await api.refresh(refreshToken: "RT-0")
    let fields = formFields(transport.requests.first?.httpBody)
    #expect(fields["grant_type"] == "refresh_token")
    #expect(fields["refresh_token"] == "RT-0")
    #expect(fields["code"] == nil)
    #expect(testSigner.verify(AlipayTokenAPI.signContent(fields), fields["sign"] ?? ""))
  }
}

/// A value behind a lock, for closures that record.
final class LockedBox<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value { lock.withLock { stored } }
  func mutate(_ body: (inout Value) -> Void) { lock.withLock { body(&stored) } }
}
