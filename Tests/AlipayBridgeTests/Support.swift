import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

@testable import AlipayBridge

/// Builders for callback URLs and small helpers shared by the tests.
enum Callback {
  static let scheme = "demoapp"

  /// Percent-encodes everything but unreserved characters, as Alipay does.
  static func encode(_ text: String) -> String {
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    return text.addingPercentEncoding(withAllowedCharacters: allowed)!
  }

  static func json(_ object: Any) -> String {
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    return String(decoding: data, as: UTF8.self)
  }

  /// The `result` string of an auth result.
  static func authResult(
    code: String? = "AUTHCODE-SECRET-1", resultCode: String? = "200", targetID: String? = nil,
    state: String? = nil, quoted: Bool = false, success: String? = "true"
  ) -> String {
    func value(_ text: String) -> String { quoted ? "\"\(text)\"" : text }
    var pairs: [String] = []
    if let success { pairs.append("success=\(value(success))") }
    if let resultCode { pairs.append("result_code=\(value(resultCode))") }
    pairs.append("app_id=\(value("2021000000000001"))")
    if let code { pairs.append("auth_code=\(value(code))") }
    pairs.append("user_id=\(value("2088000000000001"))")
    if let targetID { pairs.append("target_id=\(value(targetID))") }
    if let state { pairs.append("state=\(value(state))") }
    return pairs.joined(separator: "&")
  }

  /// The JSON payload of a safepay callback.
  static func payload(
    status: String = "9000", result: String, memo: String = "", requestType: String = "safepay"
  ) -> String {
    json([
      "memo": ["result": result, "ResultStatus": status, "memo": memo],
      "requestType": requestType,
    ])
  }

  /// `demoapp://safepay/?<encoded JSON>`.
  static func safepay(_ payload: String) -> URL {
    URL(string: "\(scheme)://safepay/?\(encode(payload))")!
  }

  /// A successful auth callback for `requestID`.
  static func success(
    _ requestID: String?, code: String = "AUTHCODE-SECRET-1"
  ) -> URL {
    safepay(payload(result: authResult(code: code, targetID: requestID)))
  }

  /// A failed auth callback with `status`, naming `requestID` if given.
  static func failure(_ status: String, _ requestID: String?) -> URL {
    safepay(payload(status: status, result: authResult(code: nil, targetID: requestID)))
  }

  /// A payment result, as AlipaySDK's payment flow returns it.
  static func payment() -> URL {
    let result = json([
      "alipay_trade_app_pay_response": ["code": "10000", "out_trade_no": "T1", "msg": "Success"],
      "sign": "abc",
    ])
    return safepay(payload(result: result))
  }
}

/// A provider whose auth URL embeds the request id as `state`.
func makeProvider(
  clock: ManualClock = ManualClock(),
  grace: Duration = .seconds(3),
  open: @escaping AlipayAuthCodeProvider.Opener
) -> AlipayAuthCodeProvider {
  AlipayAuthCodeProvider(
    clock: clock, returnGracePeriod: grace,
    authURL: { request in
      URL(string: "https://integrator.example/alipay/auth?state=\(request.requestID)")!
    },
    open: open)
}

func makeRequest(_ id: String) -> AuthorizationRequest {
  AuthorizationRequest(key: AccountKey(mcUid: "u1"), reason: .missing, requestID: id)
}

/// Reads events from a subscription until `predicate` holds; returns everything read.
func readEvents(
  _ iterator: inout AsyncStream<BridgeEvent>.Iterator,
  until predicate: (BridgeEvent) -> Bool
) async -> [BridgeEvent] {
  var seen: [BridgeEvent] = []
  while let event = await iterator.next() {
    seen.append(event)
    if predicate(event) { break }
  }
  return seen
}

/// Thread-safe box for values the tests' closures record.
final class Recorder<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var values: [Value] = []
  func append(_ value: Value) { lock.withLock { values.append(value) } }
  var all: [Value] { lock.withLock { values } }
}
