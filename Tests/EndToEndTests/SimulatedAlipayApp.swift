import Foundation
import LoopbackTokenServer

/// SIMULATED ALIPAY APP, in process. No real Alipay is involved.
///
/// ``open(_:)`` is the opener injected into `AlipayAuthCodeProvider` (in an app:
/// `UIApplication.shared.open`). It records every bounce and reads the request id that the
/// integrator's signed auth URL carries as `target_id`. The test then plays the user: it asks
/// for the callback URL the real Alipay would open the host app with (``authorizedCallback(for:)``,
/// ``cancelledCallback(for:)``, ``forgedCallback(targetID:)``) and hands that URL to the real
/// `AlipayCallbackRouter`, as the app delegate's `application(_:open:options:)` would.
///
/// The callback URLs have the shape the bridge reads (Sources/AlipayBridge/Documentation.docc/TheAlipayCallbackBridge.md, "URL flow"):
/// `<scheme>://safepay/?<percent-encoded JSON>` with
/// `{"memo": {"result": "success=true&result_code=200&app_id=...&auth_code=...&user_id=2088...
/// &target_id=<request id>", "ResultStatus": "9000", "memo": ""}, "requestType": "safepay"}`.
/// They prove nothing about the real app beyond that inferred shape.
final class SimulatedAlipayApp: @unchecked Sendable {
  /// One bounce: the URL the host app opened and the request id it carries.
  struct Bounce: Sendable {
    var url: URL
    var targetID: String
  }

  /// The host app's own URL scheme (its `CFBundleURLTypes` entry).
  static let appScheme = "e2edemoapp"
  /// The Alipay app id the simulated codes are issued for.
  static let appID = "2021000000000001"

  private let lock = NSLock()
  private var bounces: [Bounce] = []
  private var delivered = 0
  private var watchers: [(index: Int, continuation: CheckedContinuation<Bounce, Never>)] = []
  private var issued: [String] = []

  /// How many times the host app opened Alipay.
  var openCount: Int { lock.withLock { bounces.count } }

  /// The auth codes handed out so far (test fixtures; never printed).
  var issuedCodes: [String] { lock.withLock { issued } }

  /// The opener: Alipay "opens" and shows its consent page. Always succeeds (Alipay is
  /// installed).
  func open(_ url: URL) async -> Bool {
    let targetID =
      URLComponents(url: url, resolvingAgainstBaseURL: false)?
      .queryItems?.first { $0.name == "target_id" }?.value ?? ""
    let bounce = Bounce(url: url, targetID: targetID)
    let ready = lock.withLock { () -> [CheckedContinuation<Bounce, Never>] in
      bounces.append(bounce)
      let index = bounces.count - 1
      let ready = watchers.filter { $0.index == index }.map(\.continuation)
      watchers.removeAll { $0.index == index }
      return ready
    }
    for continuation in ready { continuation.resume(returning: bounce) }
    return true
  }

  /// Waits (without polling) for the next bounce not yet returned by this method.
  func nextBounce() async -> Bounce {
    await withCheckedContinuation { (continuation: CheckedContinuation<Bounce, Never>) in
      let ready = lock.withLock { () -> Bounce? in
        let index = delivered
        delivered += 1
        if index < bounces.count { return bounces[index] }
        watchers.append((index, continuation))
        return nil
      }
      if let ready { continuation.resume(returning: ready) }
    }
  }

  /// The user authorizes: the success callback for `bounce`, with a fresh auth code.
  ///
  /// - Returns: The callback URL and the code it carries.
  func authorizedCallback(for bounce: Bounce) -> (url: URL, code: String) {
    let code = "E2E-AUTHCODE-\(UUID().uuidString)"
    lock.withLock { issued.append(code) }
    let result = Self.result(code: code, targetID: bounce.targetID)
    return (Self.safepay(status: "9000", result: result), code)
  }

  /// The user taps cancel in Alipay: ResultStatus 6001 naming the request.
  func cancelledCallback(for bounce: Bounce) -> URL {
    Self.safepay(
      status: "6001", result: Self.result(code: nil, targetID: bounce.targetID, success: "false"),
      memo: "用户取消")
  }

  /// A FORGED callback (another app, or a replay from an earlier launch): a well-formed success
  /// that names `targetID` (possibly none) and carries a code of its own.
  func forgedCallback(targetID: String?) -> URL {
    let result = Self.result(code: "FORGED-AUTHCODE-\(UUID().uuidString)", targetID: targetID)
    return Self.safepay(status: "9000", result: result)
  }

  /// The `result` string of an auth_V2 result.
  static func result(code: String?, targetID: String?, success: String = "true") -> String {
    var pairs = ["success=\(success)", "result_code=\(code == nil ? "6001" : "200")"]
    pairs.append("app_id=\(appID)")
    if let code { pairs.append("auth_code=\(code)") }
    pairs.append("user_id=\(TokenServer.userID)")
    if let targetID { pairs.append("target_id=\(targetID)") }
    return pairs.joined(separator: "&")
  }

  /// `<appScheme>://safepay/?<percent-encoded JSON>`, as Alipay opens the host app.
  static func safepay(status: String, result: String, memo: String = "") -> URL {
    let payload: [String: Any] = [
      "memo": ["result": result, "ResultStatus": status, "memo": memo],
      "requestType": "safepay",
    ]
    let data = try! JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])
    var allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyz")
    allowed.insert(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")
    let encoded = String(decoding: data, as: UTF8.self)
      .addingPercentEncoding(withAllowedCharacters: allowed)!
    return URL(string: "\(appScheme)://safepay/?\(encoded)")!
  }
}
