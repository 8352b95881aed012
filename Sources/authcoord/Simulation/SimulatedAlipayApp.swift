import AlipayBridge
import AuthCoordinator
import Foundation

/// A SIMULATION of the Alipay app, in process. It stands in for `UIApplication.open`: it reads
/// the request id from the integrator's auth URL, lets the simulated user think for a while on
/// the demo's clock, and then opens the host app with a `safepay` callback URL, which goes
/// through the real router and parser. The URL has the shape the bridge reads (inferred from
/// integrations, not from a vendor specification; Sources/AlipayBridge/Documentation.docc/TheAlipayCallbackBridge.md, "URL flow"):
/// `<scheme>://safepay/?<percent-encoded JSON>`, the JSON being `{"memo": {"result":
/// "success=\"true\"&result_code=\"200\"&app_id=...&auth_code=...&user_id=2088...&target_id=<id>",
/// "ResultStatus": "9000", "memo": ""}, "requestType": "safepay"}`, where `target_id` echoes the
/// request id (see `callbackURL(scheme:requestID:code:userID:)`).
final class SimulatedAlipayApp: Sendable {
  enum UserBehaviour: Sendable {
    /// Authorizes after `after` on the clock.
    case authorizes(after: Duration)
    /// Leaves for Alipay and never comes back to the app.
    case neverReturns
    /// Comes back to the app after `after` without authorizing (no callback).
    case returnsWithoutAuthorizing(after: Duration)
  }

  let scheme: String
  let clock: VirtualClock
  let behaviour: UserBehaviour
  let timeline: Timeline
  /// Runs when the user is sent to Alipay (the demo logs the user out of the app here).
  let onBounce: (@Sendable () async -> Void)?
  /// The auth code (and Alipay user id) Alipay issues when the user consents, for the host
  /// app's user named in the auth URL (`mc_uid`): the simulated gateway's, in the demo.
  let issueCode: @Sendable (_ mcUid: String?) -> (code: String, userID: String)
  private let connection = Connection()

  final class Connection: @unchecked Sendable {
    let lock = NSLock()
    var router: AlipayCallbackRouter?
    var provider: AlipayAuthCodeProvider?
    var bounces = 0
  }

  init(
    scheme: String, clock: VirtualClock, behaviour: UserBehaviour, timeline: Timeline,
    onBounce: (@Sendable () async -> Void)? = nil,
    issueCode: @escaping @Sendable (_ mcUid: String?) -> (code: String, userID: String)
  ) {
    self.issueCode = issueCode
    self.scheme = scheme
    self.clock = clock
    self.behaviour = behaviour
    self.timeline = timeline
    self.onBounce = onBounce
  }

  func connect(router: AlipayCallbackRouter, provider: AlipayAuthCodeProvider) {
    connection.lock.withLock {
      connection.router = router
      connection.provider = provider
    }
  }

  var bounces: Int { connection.lock.withLock { connection.bounces } }

  /// The opener handed to the provider.
  func open(_ url: URL) async -> Bool {
    let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
    let requestID = query.first { $0.name == "state" }?.value
    let mcUid = query.first { $0.name == "mc_uid" }?.value
    let bounce = connection.lock.withLock {
      connection.bounces += 1
      return connection.bounces
    }
    timeline.log("bounce #\(bounce): the user is sent to Alipay")
    if let onBounce { Task { await onBounce() } }
    let (router, provider) = connection.lock.withLock { (connection.router, connection.provider) }
    let clock = self.clock
    let timeline = self.timeline
    let scheme = self.scheme
    let issueCode = self.issueCode
    switch behaviour {
    case .neverReturns:
      timeline.log("the user stays in Alipay and never comes back")
    case .authorizes(let after):
      Task {
        try? await clock.sleep(for: after)
        timeline.log("the user authorized in Alipay; Alipay opens \(scheme)://safepay/...")
        let issued = issueCode(mcUid)
        let url = Self.callbackURL(
          scheme: scheme, requestID: requestID, code: issued.code, userID: issued.userID)
        _ = router?.handle(url)
        provider?.appDidBecomeActive()
      }
    case .returnsWithoutAuthorizing(let after):
      Task {
        try? await clock.sleep(for: after)
        timeline.log("the user switched back to the app without authorizing (no callback)")
        provider?.appDidBecomeActive()
      }
    }
    return true
  }

  /// The callback Alipay opens the app with after a successful authorization.
  static func callbackURL(scheme: String, requestID: String?, code: String, userID: String)
    -> URL
  {
    var result = "success=\"true\"&result_code=\"200\"&app_id=\"2021000000000000\""
    result += "&auth_code=\"\(code)\"&user_id=\"\(userID)\""
    if let requestID { result += "&target_id=\"\(requestID)\"" }
    let memo: [String: Any] = [
      "memo": ["result": result, "ResultStatus": "9000", "memo": ""],
      "requestType": "safepay",
    ]
    let json = String(
      decoding: try! JSONSerialization.data(withJSONObject: memo, options: [.sortedKeys]),
      as: UTF8.self)
    let encoded = json.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    return URL(string: "\(scheme)://safepay/?\(encoded)")!
  }
}
