import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

@Suite(.timeLimit(.minutes(2))) struct AlipayCallbackRouterTests {
  struct Hooks {
    let accountConnect = Recorder<URL>()
    let payment = Recorder<URL>()
    let provider = makeProvider { _ in true }
    let router: AlipayCallbackRouter

    init() {
      let accountConnect = accountConnect
      let payment = payment
      router = AlipayCallbackRouter(
        provider: provider, appSchemes: [Callback.scheme],
        accountConnect: { accountConnect.append($0) },
        payment: { payment.append($0) })
    }
  }

  @Test func insideURLsGoToTheAccountConnectHook() {
    let hooks = Hooks()
    for text in [
      "demoapp://mobile.inside.com/auth?result=x", "DemoApp://ACCOUNT.INSIDE.COM/",
      "demoapp://auth.inside.com:443/path",
    ] {
      let url = URL(string: text)!
      #expect(hooks.router.handle(url) == .accountConnect)
    }
    #expect(hooks.accountConnect.all.count == 3)
    #expect(hooks.payment.all.isEmpty)
  }

  @Test func paymentResultsGoToThePaymentHook() {
    let hooks = Hooks()
    let url = Callback.payment()
    #expect(hooks.router.handle(url) == .payment)
    #expect(hooks.payment.all == [url])
  }

  @Test func authResultsGoToTheProvider() async throws {
    let hooks = Hooks()
    var events = hooks.provider.events.makeAsyncIterator()
    let provider = hooks.provider
    let task = Task { try await provider.authCode(for: makeRequest("route")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "route") }
    #expect(
      hooks.router.handle(Callback.success("route")) == .authResult(.matched(requestID: "route")))
    _ = try await task.value
    // The vendor's payment rule: every safepay URL reaches the payment SDK, auth results too.
    #expect(hooks.payment.all == [Callback.success("route")])
    #expect(hooks.accountConnect.all.isEmpty)
  }

  @Test(arguments: [
    "demoapp://other/?x=1", "https://example.com/safe", "demoapp:safepay", "demoapp://inside.com/",
    "mailto:someone@example.com", "file:///tmp/x",
  ])
  func otherURLsAreNotOurs(text: String) {
    let hooks = Hooks()
    let disposition = hooks.router.handle(URL(string: text)!)
    #expect(disposition == .notOurs)
    #expect(!disposition.isHandled)
  }

  /// Runs `body` while request `id` is pending, then checks it is still pending (nothing
  /// completed it) and cancels it.
  private func whilePending(_ hooks: Hooks, _ id: String, _ body: () -> Void) async {
    var events = hooks.provider.events.makeAsyncIterator()
    let provider = hooks.provider
    let task = Task { try await provider.authCode(for: makeRequest(id)) }
    _ = await readEvents(&events) { $0 == .opened(requestID: id) }
    body()
    #expect(provider.pendingRequestIDs == [id])
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  /// A successful auth result for `id` on `scheme://host`.
  private func forgedSuccess(_ id: String, scheme: String = Callback.scheme, host: String) -> URL {
    let payload = Callback.payload(result: Callback.authResult(targetID: id))
    return URL(string: "\(scheme)://\(host)/?\(Callback.encode(payload))")!
  }

  @Test(
    "a lookalike safepay host is passed to the payment hook, never read as an auth result",
    arguments: [
      "evil-safepay.example", "safepay.evil.net", "notsafepay", "SAFEPAY.example",
      "user@safepay", "safepay:80", "x.safepay",
    ])
  func lookalikeSafepayHostsAreNeverAuthResults(host: String) async throws {
    let hooks = Hooks()
    let url = forgedSuccess("forged", host: host)
    await whilePending(hooks, "forged") {
      #expect(hooks.router.handle(url) == .payment)
    }
    #expect(hooks.payment.all == [url])
    #expect(!SafepayCallback.isSafepay(url))
    #expect(throws: AuthCoordinatorError.self) { try SafepayCallback(url: url) }
  }

  @Test(
    "an auth result on another scheme than the app's is never read",
    arguments: ["evil", "https", "demoapp2", "alipays"])
  func authResultsOnAnotherSchemeAreNeverRead(scheme: String) async throws {
    let hooks = Hooks()
    let url = forgedSuccess("forged", scheme: scheme, host: "safepay")
    await whilePending(hooks, "forged") {
      #expect(hooks.router.handle(url) == .payment)
    }
    // The vendor's payment rule (host contains safepay) still hands it to the payment SDK.
    #expect(hooks.payment.all == [url])
  }

  @Test(
    "a lookalike or foreign-scheme inside.com URL is not ours",
    arguments: [
      "demoapp://x.inside.com.evil.net/auth", "demoapp://evil.inside.community/",
      "demoapp://user@a.inside.com/", "demoapp://a..inside.com/",
      "evil://account.inside.com/", "https://account.inside.com/",
    ])
  func lookalikeInsideURLsAreNotOurs(text: String) {
    let hooks = Hooks()
    #expect(hooks.router.handle(URL(string: text)!) == .notOurs)
    #expect(hooks.accountConnect.all.isEmpty)
  }

  @Test func unreadableSafepayGoesToPaymentAndIsReportedMalformed() async {
    let hooks = Hooks()
    var events = hooks.provider.events.makeAsyncIterator()
    #expect(hooks.router.handle(URL(string: "demoapp://safepay/?garbage")!) == .payment)
    #expect(hooks.payment.all.count == 1)
    #expect(await events.next() == .callbackRejected(reason: .malformed, requestID: nil))
  }

  @Test func malformedAuthResultIsRejectedAndStillReachesThePaymentHook() {
    let hooks = Hooks()
    let payload = Callback.json(["memo": ["result": Callback.authResult(targetID: "r")]])
    let url = Callback.safepay(payload)
    #expect(
      hooks.router.handle(url) == .authResult(.rejected(reason: .malformed, requestID: nil)))
    #expect(hooks.payment.all == [url])
  }

  @Test(
    "every URL whose host contains safepay reaches the payment hook, whatever else happens",
    arguments: [
      Callback.success("pending"), Callback.success(nil), Callback.success("unknown-id"),
      Callback.failure("6001", "pending"), Callback.failure("6001", nil), Callback.payment(),
      URL(string: "demoapp://safepay/?garbage")!, URL(string: "demoapp://safepay/")!,
      URL(string: "demoapp://SAFEPAY/?x")!, URL(string: "evil://safepay/?x")!,
      URL(string: "demoapp://evil-safepay.example/?x")!, URL(string: "https://safepay.example/")!,
      Callback.safepay(Callback.json(["memo": ["result": "auth_code=x&target_id=pending"]])),
    ])
  func everySafepayURLReachesThePaymentHook(url: URL) async throws {
    let hooks = Hooks()
    await whilePending(hooks, "pending-\(UUID())") {
      #expect(hooks.router.handle(url).isHandled)
    }
    #expect(hooks.payment.all == [url])
    #expect(hooks.accountConnect.all.isEmpty)
  }

  @Test("the Inside-flow router reads no auth result and passes every safepay URL on")
  func insideFlowRouterPassesSafepayThrough() {
    let payment = Recorder<URL>()
    let accountConnect = Recorder<URL>()
    let router = AlipayCallbackRouter(
      appSchemes: [Callback.scheme], accountConnect: { accountConnect.append($0) },
      payment: { payment.append($0) })
    let urls = [Callback.success("r"), Callback.payment(), URL(string: "x://a-safepay-b/")!]
    for url in urls { #expect(router.handle(url) == .payment) }
    #expect(payment.all == urls)
    let inside = URL(string: "demoapp://account.inside.com/cb")!
    #expect(router.handle(inside) == .accountConnect)
    #expect(accountConnect.all == [inside])
    #expect(router.handle(URL(string: "demoapp://other/")!) == .notOurs)
  }

  @Test("a missing hook never reports its URL as handled")
  func missingHooksDoNotClaimTheURL() async throws {
    let provider = makeProvider { _ in true }
    let router = AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme])
    for text in [
      "demoapp://account.inside.com/cb", "demoapp://safepay/?garbage", "evil://safepay/?x",
      "https://evil-safepay.example/",
    ] {
      let disposition = router.handle(URL(string: text)!)
      #expect(disposition == .unhandled, "\(text)")
      #expect(!disposition.isHandled)
    }
    #expect(router.handle(Callback.payment()) == .unhandled)
    let inside = AlipayCallbackRouter(appSchemes: [Callback.scheme])
    #expect(inside.handle(Callback.success("r")) == .unhandled)
    #expect(inside.handle(URL(string: "demoapp://account.inside.com/")!) == .unhandled)
    // An auth result the provider read was handled, hook or not.
    #expect(
      router.handle(Callback.success("nobody")).isHandled)
  }

  /// 10,000 random and mutated URLs: nothing crashes and nothing completes the pending request.
  @Test func randomGarbageNeverCrashesOrCompletes() async throws {
    let seed =
      UInt64(ProcessInfo.processInfo.environment["ALIPAY_FUZZ_SEED"] ?? "")
      ?? UInt64.random(in: 1...UInt64.max)
    print(
      "randomGarbageNeverCrashesOrCompletes seed: \(seed) (rerun with ALIPAY_FUZZ_SEED=\(seed))")
    var rng = SplitMix64(seed: seed)

    let hooks = Hooks()
    var events = hooks.provider.events.makeAsyncIterator()
    let provider = hooks.provider
    let secretID = "pending-\(seed)"
    let task = Task { try await provider.authCode(for: makeRequest(secretID)) }
    _ = await readEvents(&events) { $0 == .opened(requestID: secretID) }

    let templates = [
      Callback.success("other").absoluteString, Callback.failure("6001", "x").absoluteString,
      Callback.payment().absoluteString, "demoapp://safepay/?",
      "demoapp://safepay/?\(Callback.payload(result: Callback.authResult(targetID: "raw")))",
      "demoapp://a.inside.com/x",
    ]
    let alphabet = Array(
      "%{}[]\"&=?/#:\\,0123456789abcdefABCDEF safepay.inside.com\u{0}\u{7f}é漢😀")
    var matched = 0
    for _ in 0..<10_000 {
      var text: String
      if rng.next() % 2 == 0 {
        let length = Int(rng.next() % 200)
        text = "demoapp://"
        for _ in 0..<length { text.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
      } else {
        var bytes = Array(templates[Int(rng.next() % UInt64(templates.count))].utf8)
        for _ in 0..<(1 + rng.next() % 8) where !bytes.isEmpty {
          let index = Int(rng.next() % UInt64(bytes.count))
          switch rng.next() % 3 {
          case 0: bytes[index] = UInt8(truncatingIfNeeded: rng.next())
          case 1: bytes.remove(at: index)
          default: bytes.insert(UInt8(truncatingIfNeeded: rng.next()), at: index)
          }
        }
        text = String(decoding: bytes, as: UTF8.self)
      }
      _ = try? SafepayCallback(urlString: text)
      _ = SafepayCallback.classify(text, appSchemes: [Callback.scheme])
      if let url = URL(string: text), case .authResult(.matched) = hooks.router.handle(url) {
        matched += 1
      }
    }
    #expect(matched == 0)
    #expect(provider.pendingRequestIDs == [secretID])
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
  }
}

/// A small seeded generator, so a failing garbage run can be replayed.
struct SplitMix64: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}
