import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

/// `print`, `String(describing:)`, `String(reflecting:)` and `dump` of an exchanger (and of what
/// holds one) show header and parameter names, never their values, and no credential from the
/// endpoint URL.
@Suite("HTTPTokenExchanger descriptions redact secrets", .timeLimit(.minutes(2)))
struct ExchangerDescriptionTests {
  static let secrets = [
    "BEARER-SECRET-1", "HEADER-SECRET-2", "PARAM-SECRET-3", "QUERY-SECRET-4", "pw-SECRET-5",
    "user-SECRET-6", "FRAGMENT-SECRET-7",
  ]

  static func exchanger() throws -> HTTPTokenExchanger {
    let endpoint = try #require(
      URL(
        string: "https://user-SECRET-6:pw-SECRET-5@api.example.com:8443/alipay/token"
          + "?api_key=QUERY-SECRET-4&v=1#FRAGMENT-SECRET-7"))
    return HTTPTokenExchanger(
      endpoint: endpoint, encoding: .postJSON, parameters: ["client_secret": "PARAM-SECRET-3"],
      headers: ["Authorization": "Bearer BEARER-SECRET-1", "X-Api-Key": "HEADER-SECRET-2"])
  }

  /// Every text a log line or a debugger could show for `value`.
  static func texts(of value: Any) -> [String] {
    var printed = ""
    print(value, to: &printed)
    var debugPrinted = ""
    debugPrint(value, to: &debugPrinted)
    var dumped = ""
    dump(value, to: &dumped)
    return [
      printed, debugPrinted, dumped, String(describing: value), String(reflecting: value),
      "\(value)",
    ]
  }

  @Test("the exchanger shows header names and the endpoint's host, no values")
  func exchangerIsRedacted() throws {
    let exchanger = try Self.exchanger()
    for text in Self.texts(of: exchanger) {
      for secret in Self.secrets {
        #expect(!text.contains(secret), "\(secret) leaked: \(text)")
      }
      #expect(text.contains("Authorization"), "\(text)")
      #expect(text.contains("X-Api-Key"), "\(text)")
      #expect(text.contains("client_secret"), "\(text)")
      #expect(text.contains("api.example.com"), "\(text)")
      #expect(text.contains("/alipay/token"), "\(text)")
      #expect(text.contains("api_key"), "\(text)")
    }
  }

  @Test("an authorizer holding the exchanger shows no secret either")
  func authorizerIsRedacted() throws {
    let authorizer = AlipayAuthorizer(
      provider: AlipayAuthCodeProvider(
        authURL: { _ in URL(fileURLWithPath: "/") }, open: { _ in false }),
      exchanger: try Self.exchanger())
    for text in Self.texts(of: authorizer) {
      for secret in Self.secrets {
        #expect(!text.contains(secret), "\(secret) leaked: \(text)")
      }
    }
  }

  @Test("the redacted endpoint keeps scheme, host, port, path and query names")
  func redactedEndpoint() throws {
    let exchanger = try Self.exchanger()
    #expect(
      HTTPTokenExchanger.redacted(exchanger.endpoint)
        == "https://<redacted>@api.example.com:8443/alipay/token?api_key=<redacted>&v=<redacted>"
        + "#<redacted>")
    let plain = try #require(URL(string: "http://127.0.0.1:8080/token"))
    #expect(HTTPTokenExchanger.redacted(plain) == "http://127.0.0.1:8080/token")
  }

  @Test("an auth code's dump does not show the code")
  func authCodeDumpIsRedacted() {
    let code = AuthCode("AUTHCODE-SECRET-8", appID: "2021000000000000", userID: "2088")
    for text in Self.texts(of: code) {
      #expect(!text.contains("AUTHCODE-SECRET-8"), "auth code leaked: \(text)")
    }
  }
}
