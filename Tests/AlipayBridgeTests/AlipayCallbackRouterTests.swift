import Foundation
import Testing

@testable import AuthCoordinator

@Suite struct AlipayCallbackRouterTests {
  struct Hooks {
    let accountConnect = Recorder<URL>()
    let payment = Recorder<URL>()
    let provider = makeProvider { _ in true }
    let router: AlipayCallbackRouter

    init() {
      let accountConnect = accountConnect
      let payment = payment
      router = AlipayCallbackRouter(
        provider: provider, accountConnect: { accountConnect.append($0) },
        payment: { payment.append($0) })
    }
  }

  @Test func insideURLsGoToTheAccountConnectHook() {
    let hooks = Hooks()
    for text in [
      "demoapp://mobile.inside.com/auth?result=x", "demoapp://ACCOUNT.INSIDE.COM/",
      "https://auth.inside.com:443/path",
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
    #expect(hooks.payment.all.isEmpty)
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

  @Test func unreadableSafepayGoesToPaymentAndIsReportedMalformed() async {
    let hooks = Hooks()
    var events = hooks.provider.events.makeAsyncIterator()
    #expect(hooks.router.handle(URL(string: "demoapp://safepay/?garbage")!) == .payment)
    #expect(hooks.payment.all.count == 1)
    #expect(await events.next() == .callbackRejected(reason: .malformed, requestID: nil))
  }

  @Test func malformedAuthResultGoesNowhere() {
    let hooks = Hooks()
    let payload = Callback.json(["memo": ["result": Callback.authResult(targetID: "r")]])
    #expect(
      hooks.router.handle(Callback.safepay(payload))
        == .authResult(.rejected(reason: .malformed, requestID: nil)))
    #expect(hooks.payment.all.isEmpty)
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
      _ = SafepayCallback.classify(text)
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
