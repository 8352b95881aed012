import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

/// `AlipayCallbackRouter.handleUniversalLink(_:)`: Alipay's results through a universal link on
/// the app's associated domain (`NSUserActivity.webpageURL`).
@Suite(.timeLimit(.minutes(2))) struct UniversalLinkRouterTests {
  static let prefix = "https://example.com/alipay/"

  /// A universal link inside the prefix carrying `payload` in its query, as a `safepay` URL
  /// carries it.
  static func link(_ payload: String, path: String = "alipay/result") -> URL {
    URL(string: "https://example.com/\(path)?result=\(Callback.encode(payload))")!
  }

  static func success(_ requestID: String?) -> URL {
    link(Callback.payload(result: Callback.authResult(targetID: requestID)))
  }

  struct Hooks {
    let payment = Recorder<URL>()
    let universalLink = Recorder<URL>()
    let provider = makeProvider { _ in true }
    let router: AlipayCallbackRouter

    init() {
      let payment = payment
      let universalLink = universalLink
      router = AlipayCallbackRouter(
        provider: provider, appSchemes: [Callback.scheme],
        payment: { payment.append($0) },
        universalLinkPrefix: UniversalLinkPrefix(UniversalLinkRouterTests.prefix)!,
        universalLink: { universalLink.append($0) })
    }

    /// Starts an authorization for `id` and waits until its URL was opened.
    func pending(_ id: String) async -> Task<AuthCode, any Error> {
      var events = provider.events.makeAsyncIterator()
      let provider = provider
      let task = Task { try await provider.authCode(for: makeRequest(id)) }
      _ = await readEvents(&events) { $0 == .opened(requestID: id) }
      return task
    }
  }

  @Test func successCompletesThePendingAuthorization() async throws {
    let hooks = Hooks()
    let task = await hooks.pending("ul-1")
    let url = Self.success("ul-1")
    #expect(hooks.router.handleUniversalLink(url) == .authResult(.matched(requestID: "ul-1")))
    let code = try await task.value
    #expect(
      code == AuthCode("AUTHCODE-SECRET-1", appID: "2021000000000001", userID: "2088000000000001"))
    // Every Alipay link reaches AlipaySDK's universal-link handler; none the payment hook.
    #expect(hooks.universalLink.all == [url])
    #expect(hooks.payment.all.isEmpty)
    #expect(hooks.provider.pendingRequestIDs.isEmpty)
  }

  @Test func userCancelFailsThePendingAuthorization() async throws {
    let hooks = Hooks()
    let task = await hooks.pending("ul-2")
    let url = Self.link(
      Callback.payload(status: "6001", result: Callback.authResult(code: nil, targetID: "ul-2")))
    #expect(hooks.router.handleUniversalLink(url) == .authResult(.matched(requestID: "ul-2")))
    await #expect {
      try await task.value
    } throws: { error in
      (error as? AuthCoordinatorError)?.code == .userCancelled
    }
    #expect(hooks.universalLink.all == [url])
  }

  @Test(
    "a link that is not Alipay's is not ours and reaches no hook",
    arguments: [
      "https://example.com/orders/17", "https://example.com/", "https://example.com/alipayx/r",
      "https://example.com/ALIPAY/r", "https://example.com/other/alipay/r",
      "https://example.com/alipay/../orders/17", "https://example.com/alipay/%2E%2E/orders",
    ])
  func otherLinksOfTheAppAreNotOurs(text: String) async throws {
    let hooks = Hooks()
    let task = await hooks.pending("ul-3")
    // Even carrying a valid auth result for the pending request.
    let url = URL(
      string:
        "\(text)?result=\(Callback.encode(Callback.payload(result: Callback.authResult(targetID: "ul-3"))))"
    )!
    let disposition = hooks.router.handleUniversalLink(url)
    #expect(disposition == .notOurs)
    #expect(!disposition.isHandled)
    #expect(hooks.universalLink.all.isEmpty)
    #expect(hooks.provider.pendingRequestIDs == ["ul-3"])
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @Test(
    "a link on another host, scheme or port is outside the prefix",
    arguments: [
      "https://evil.example/alipay/r", "https://example.com.evil.net/alipay/r",
      "http://example.com/alipay/r", "https://example.com:8443/alipay/r",
      "https://user@example.com/alipay/r", "demoapp://example.com/alipay/r",
      "https://sub.example.com/alipay/r",
    ])
  func linksOutsideThePrefixAreIgnored(text: String) async throws {
    let hooks = Hooks()
    let task = await hooks.pending("ul-4")
    let payload = Callback.encode(Callback.payload(result: Callback.authResult(targetID: "ul-4")))
    let url = URL(string: "\(text)?result=\(payload)")!
    #expect(hooks.router.handleUniversalLink(url) == .notOurs)
    #expect(hooks.universalLink.all.isEmpty)
    #expect(hooks.provider.pendingRequestIDs == ["ul-4"])
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @Test func aLinkMatchingNoPendingAuthorizationCompletesNothing() async throws {
    let hooks = Hooks()
    var events = hooks.provider.events.makeAsyncIterator()
    let task = await hooks.pending("ul-5")
    for (url, reason) in [
      (Self.success("forged-id"), BridgeEvent.RejectReason.unknownRequestID),
      (Self.success(nil), .missingRequestID),
    ] {
      let disposition = hooks.router.handleUniversalLink(url)
      guard case .authResult(.rejected(reason, _)) = disposition else {
        Issue.record("\(url): \(disposition)")
        continue
      }
    }
    let rejected = await readEvents(&events) {
      $0 == .callbackRejected(reason: .missingRequestID, requestID: nil)
    }
    #expect(rejected.contains(.callbackRejected(reason: .unknownRequestID, requestID: "forged-id")))
    #expect(hooks.provider.pendingRequestIDs == ["ul-5"])
    // Still handed to AlipaySDK, as every safepay URL is handed to it.
    #expect(hooks.universalLink.all.count == 2)
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @Test func paymentResultsAndUnreadableLinksGoToTheUniversalLinkHook() {
    let hooks = Hooks()
    let payment = Self.link(
      Callback.payload(result: Callback.json(["alipay_trade_app_pay_response": ["code": "10000"]])))
    let bare = URL(string: "https://example.com/alipay/")!
    let garbage = URL(string: "https://EXAMPLE.com/alipay/r?x=%7Bnot-json")!
    for url in [payment, bare, garbage] {
      #expect(hooks.router.handleUniversalLink(url) == .payment, "\(url)")
    }
    #expect(hooks.universalLink.all == [payment, bare, garbage])
    #expect(hooks.payment.all.isEmpty)
  }

  @Test("without a prefix, or without the hook, the router claims no universal link")
  func missingPrefixOrHookDoesNotClaimTheLink() {
    let provider = makeProvider { _ in true }
    let noPrefix = AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme])
    #expect(noPrefix.handleUniversalLink(Self.success("r")) == .notOurs)
    let noHook = AlipayCallbackRouter(
      provider: provider, appSchemes: [Callback.scheme],
      universalLinkPrefix: UniversalLinkPrefix(Self.prefix))
    #expect(noHook.handleUniversalLink(URL(string: "https://example.com/alipay/r")!) == .unhandled)
    // An auth result the provider read was handled, hook or not.
    #expect(noHook.handleUniversalLink(Self.success("nobody")).isHandled)
  }

  @Test("the Inside-flow router reads no auth result and passes every Alipay link on")
  func insideFlowRouterPassesLinksThrough() {
    let universalLink = Recorder<URL>()
    let router = AlipayCallbackRouter(
      appSchemes: [Callback.scheme], universalLinkPrefix: UniversalLinkPrefix(Self.prefix),
      universalLink: { universalLink.append($0) })
    #expect(router.handleUniversalLink(Self.success("r")) == .payment)
    #expect(router.handleUniversalLink(URL(string: "https://example.com/other")!) == .notOurs)
    #expect(universalLink.all == [Self.success("r")])
  }

  @Test func universalLinksAreNotReadByHandle() {
    let hooks = Hooks()
    #expect(hooks.router.handle(Self.success("r")) == .notOurs)
    #expect(hooks.universalLink.all.isEmpty)
  }
}

@Suite struct UniversalLinkPrefixTests {
  @Test(arguments: [
    "http://example.com/alipay/", "https://", "example.com/alipay/", "https://u@example.com/a/",
    "https://example.com/a/?x=1", "https://example.com/a/#f", "https://example.com/a/../b/",
    "not a url",
  ])
  func invalidPrefixesAreRejected(text: String) {
    #expect(UniversalLinkPrefix(text) == nil)
  }

  @Test func prefixIsNormalised() throws {
    let prefix = try #require(UniversalLinkPrefix("HTTPS://Example.COM/alipay"))
    #expect(prefix.host == "example.com")
    #expect(prefix.path == "/alipay/")
    #expect(prefix.description == "https://example.com/alipay/")
    #expect(prefix.contains(URL(string: "https://example.com/alipay")!))
    #expect(prefix.contains(URL(string: "https://example.com/alipay/a/b?c=d#e")!))
    #expect(!prefix.contains(URL(string: "https://example.com/alipay2")!))
    let domain = try #require(UniversalLinkPrefix("https://example.com"))
    #expect(domain.path == "/")
    #expect(domain.contains(URL(string: "https://example.com/anything")!))
    let port = try #require(UniversalLinkPrefix("https://example.com:8443/a/"))
    #expect(port.contains(URL(string: "https://example.com:8443/a/x")!))
    #expect(!port.contains(URL(string: "https://example.com/a/x")!))
  }
}
