import AuthCoordinator
import Foundation

@testable import AlipayBridge

/// A SIMULATION of the Alipay app, in process, for end-to-end tests of the bounce.
///
/// Its ``open(_:)`` stands in for `UIApplication.open`: it reads the request id (`state`) from
/// the integrator's auth URL and, following its script, produces the callback URL that the real
/// Alipay would open the host app with, handing it to the router as the app delegate would.
/// It talks to no real Alipay and proves nothing about the real app's URL formats beyond the
/// shapes the bridge reads (Sources/AlipayBridge/Documentation.docc/TheAlipayCallbackBridge.md, "URL flow": `<scheme>://safepay/?<JSON>`).
final class FakeAlipayApp: @unchecked Sendable {
  enum Script: Sendable {
    /// The user authorizes; the callback carries `code` and (if `echoID`) the request id.
    case authorize(code: String, echoID: Bool)
    /// Alipay answers with `status` (6001 cancel, ...), naming the request if `echoID`.
    case fail(status: String, echoID: Bool)
    /// The user comes back without Alipay calling the app.
    case noCallback
    /// Alipay is not installed: opening fails.
    case notInstalled
  }

  private let lock = NSLock()
  private var router: AlipayCallbackRouter?
  private var script: Script
  private var held: [URL] = []
  private let deliverDuringOpen: Bool
  let openedURLs = Recorder<URL>()

  /// - Parameters:
  ///   - script: What the simulated user and Alipay do.
  ///   - deliverDuringOpen: Deliver the callback before `open` returns (else hold it until
  ///     ``returnToApp()``).
  init(script: Script, deliverDuringOpen: Bool = false) {
    self.script = script
    self.deliverDuringOpen = deliverDuringOpen
  }

  func connect(_ router: AlipayCallbackRouter) { lock.withLock { self.router = router } }

  /// The opener to give the provider.
  func open(_ url: URL) async -> Bool {
    openedURLs.append(url)
    let (script, router) = lock.withLock { (self.script, self.router) }
    let id = URLComponents(url: url, resolvingAgainstBaseURL: false)?
      .queryItems?.first { $0.name == "state" }?.value
    let callback: URL?
    switch script {
    case .notInstalled: return false
    case .noCallback: callback = nil
    case .authorize(let code, let echoID):
      callback = Callback.success(echoID ? id : nil, code: code)
    case .fail(let status, let echoID):
      callback = Callback.failure(status, echoID ? id : nil)
    }
    if let callback {
      if deliverDuringOpen {
        router?.handle(callback)
      } else {
        lock.withLock { held.append(callback) }
      }
    }
    return true
  }

  /// The user switches back to the host app: held callbacks are delivered through the router.
  /// Returns the dispositions.
  @discardableResult
  func returnToApp() -> [URLDisposition] {
    let (urls, router) = lock.withLock { () -> ([URL], AlipayCallbackRouter?) in
      defer { held = [] }
      return (held, self.router)
    }
    return urls.map { router?.handle($0) ?? .notOurs }
  }
}
