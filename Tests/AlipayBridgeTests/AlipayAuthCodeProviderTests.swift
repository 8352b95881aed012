import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import AlipayBridge

@Suite(.timeLimit(.minutes(2))) struct AlipayAuthCodeProviderTests {
  /// A provider wired to a fake Alipay app and a router, with an event subscription.
  struct Rig {
    let clock = ManualClock()
    let alipay: FakeAlipayApp
    let provider: AlipayAuthCodeProvider
    let router: AlipayCallbackRouter

    init(
      _ script: FakeAlipayApp.Script, deliverDuringOpen: Bool = false, grace: Duration = .seconds(3)
    ) {
      let alipay = FakeAlipayApp(script: script, deliverDuringOpen: deliverDuringOpen)
      self.alipay = alipay
      provider = makeProvider(clock: clock, grace: grace) { await alipay.open($0) }
      router = AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme])
      alipay.connect(router)
    }
  }

  @Test func endToEndSuccessWithCallbackDuringOpen() async throws {
    let rig = Rig(.authorize(code: "E2E-CODE", echoID: true), deliverDuringOpen: true)
    let code = try await rig.provider.authCode(for: makeRequest("req-1"))
    #expect(code.value == "E2E-CODE")
    #expect(rig.alipay.openedURLs.all.count == 1)
    #expect(rig.provider.pendingRequestIDs.isEmpty)
  }

  @Test func endToEndSuccessWithCallbackAfterReturn() async throws {
    let rig = Rig(.authorize(code: "E2E-CODE", echoID: true))
    var events = rig.provider.events.makeAsyncIterator()
    let task = Task { try await rig.provider.authCode(for: makeRequest("req-2")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "req-2") }
    #expect(rig.alipay.returnToApp() == [.authResult(.matched(requestID: "req-2"))])
    #expect(try await task.value.value == "E2E-CODE")
    #expect(await events.next() == .callbackMatched(requestID: "req-2"))
  }

  @Test func failureCallbackWithMatchingIDCompletesWithItsError() async throws {
    let rig = Rig(.fail(status: "6001", echoID: true), deliverDuringOpen: true)
    await #expect(throws: AuthCoordinatorError(.userCancelled)) {
      try await rig.provider.authCode(for: makeRequest("req-c"))
    }
    let network = Rig(.fail(status: "6002", echoID: true), deliverDuringOpen: true)
    await #expect(throws: AuthCoordinatorError(.networkError)) {
      try await network.provider.authCode(for: makeRequest("req-n"))
    }
  }

  @Test func openerReturningFalseFailsWithAuthorizationFailed() async throws {
    let rig = Rig(.notInstalled)
    var events = rig.provider.events.makeAsyncIterator()
    do {
      _ = try await rig.provider.authCode(for: makeRequest("req-x"))
      Issue.record("expected an error")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .authorizationFailed)
      #expect(error.message.contains("LSApplicationQueriesSchemes"))
    }
    #expect(await events.next() == .openFailed(requestID: "req-x"))
    #expect(rig.provider.pendingRequestIDs.isEmpty)
    // A callback for it afterwards is late.
    #expect(
      rig.router.handle(Callback.success("req-x"))
        == .authResult(.rejected(reason: .late, requestID: "req-x")))
  }

  @Test func builderErrorPropagatesAndLeavesNothingPending() async {
    struct SigningFailed: Error {}
    let provider = AlipayAuthCodeProvider(
      clock: ManualClock(), authURL: { _ in throw SigningFailed() }, open: { _ in true })
    await #expect(throws: SigningFailed.self) {
      try await provider.authCode(for: makeRequest("req-b"))
    }
    #expect(provider.pendingRequestIDs.isEmpty)
  }

  @Test func emptyOrDuplicateRequestIDIsRefused() async throws {
    let rig = Rig(.noCallback)
    await #expect(throws: AuthCoordinatorError(.authorizationFailed)) {
      try await rig.provider.authCode(for: makeRequest(""))
    }
    var events = rig.provider.events.makeAsyncIterator()
    let first = Task { try await rig.provider.authCode(for: makeRequest("dup")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "dup") }
    await #expect(throws: AuthCoordinatorError(.authorizationFailed)) {
      try await rig.provider.authCode(for: makeRequest("dup"))
    }
    #expect(rig.provider.pendingRequestIDs == ["dup"])
    first.cancel()
    await #expect(throws: CancellationError.self) { try await first.value }
  }

  @Test func cancellationResumesPromptlyAndLaterCallbackIsLate() async throws {
    let rig = Rig(.noCallback)
    var events = rig.provider.events.makeAsyncIterator()
    let task = Task { try await rig.provider.authCode(for: makeRequest("req-k")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "req-k") }
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(rig.provider.pendingRequestIDs.isEmpty)
    #expect(
      rig.router.handle(Callback.success("req-k"))
        == .authResult(.rejected(reason: .late, requestID: "req-k")))
  }

  @Test func cancelledBeforeStartThrowsCancellation() async {
    let rig = Rig(.authorize(code: "C", echoID: true), deliverDuringOpen: true)
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await rig.provider.authCode(for: makeRequest("req-pre"))
    }
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(rig.alipay.openedURLs.all.isEmpty)
  }

  @Test func cancellationWhileOpeningResumesWithCancellation() async {
    // The opener blocks until the test releases it; the task is cancelled meanwhile.
    let gate = AsyncStream<Void>.makeStream()
    let entered = AsyncStream<Void>.makeStream()
    let provider = makeProvider { _ in
      entered.continuation.yield()
      for await _ in gate.stream { break }
      return true
    }
    let task = Task { try await provider.authCode(for: makeRequest("req-o")) }
    for await _ in entered.stream { break }
    task.cancel()
    gate.continuation.yield()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(provider.pendingRequestIDs.isEmpty)
  }

  @Test func forgedCallbacksCompleteNothing() async throws {
    let rig = Rig(.noCallback)
    var events = rig.provider.events.makeAsyncIterator()
    let task = Task { try await rig.provider.authCode(for: makeRequest("req-f")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "req-f") }

    // Exactly one request is pending, and a callback without any id still does not complete it.
    #expect(
      rig.router.handle(Callback.success(nil))
        == .authResult(.rejected(reason: .missingRequestID, requestID: nil)))
    #expect(
      rig.router.handle(Callback.success("someone-else"))
        == .authResult(.rejected(reason: .unknownRequestID, requestID: "someone-else")))
    let conflicting = Callback.safepay(
      Callback.payload(result: Callback.authResult(targetID: "req-f", state: "x")))
    #expect(
      rig.router.handle(conflicting)
        == .authResult(.rejected(reason: .conflictingRequestIDs, requestID: nil)))
    #expect(
      rig.provider.deliver(InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "F"]))
        == .rejected(reason: .missingRequestID, requestID: nil))
    let malformed = Callback.safepay(
      Callback.json(["memo": ["result": Callback.authResult(targetID: "req-f")]]))
    #expect(
      rig.router.handle(malformed) == .authResult(.rejected(reason: .malformed, requestID: nil)))
    // The router has no payment hook here, so the unreadable URL is not claimed.
    #expect(rig.router.handle(URL(string: "demoapp://safepay/?%7Bbroken")!) == .unhandled)

    var reasons: [BridgeEvent.RejectReason] = []
    for _ in 0..<6 {
      if case .callbackRejected(let reason, _)? = await events.next() { reasons.append(reason) }
    }
    #expect(
      reasons == [
        .missingRequestID, .unknownRequestID, .conflictingRequestIDs, .missingRequestID,
        .malformed, .malformed,
      ])
    #expect(rig.provider.pendingRequestIDs == ["req-f"])

    // The genuine callback still completes it.
    #expect(
      rig.router.handle(Callback.success("req-f", code: "REAL"))
        == .authResult(.matched(requestID: "req-f")))
    #expect(try await task.value.value == "REAL")
  }

  @Test func duplicateCallbackIsRejected() async throws {
    let rig = Rig(.authorize(code: "ONE", echoID: true), deliverDuringOpen: true)
    _ = try await rig.provider.authCode(for: makeRequest("req-d"))
    #expect(
      rig.router.handle(Callback.success("req-d", code: "TWO"))
        == .authResult(.rejected(reason: .duplicate, requestID: "req-d")))
  }

  @Test func callbacksRouteToTheirOwnRequests() async throws {
    let rig = Rig(.noCallback)
    var events = rig.provider.events.makeAsyncIterator()
    let a = Task { try await rig.provider.authCode(for: makeRequest("A")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "A") }
    let b = Task { try await rig.provider.authCode(for: makeRequest("B")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "B") }
    #expect(rig.provider.pendingRequestIDs == ["A", "B"])
    rig.router.handle(Callback.failure("6001", "B"))
    rig.router.handle(Callback.success("A", code: "CODE-A"))
    #expect(try await a.value.value == "CODE-A")
    await #expect(throws: AuthCoordinatorError(.userCancelled)) { try await b.value }
  }

  @Test func insideResultWithStateCompletesTheRequest() async throws {
    let rig = Rig(.noCallback)
    var events = rig.provider.events.makeAsyncIterator()
    let task = Task { try await rig.provider.authCode(for: makeRequest("in-1")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "in-1") }
    let result = InsideResult([
      "resultCode": "account_open_auth_9000",
      "result": ["auth_code": "INSIDE", "app_id": "2021", "state": "in-1"],
    ])
    #expect(rig.provider.deliver(result) == .matched(requestID: "in-1"))
    #expect(try await task.value.value == "INSIDE")
    let tooOld = Rig(.noCallback)
    var tooOldEvents = tooOld.provider.events.makeAsyncIterator()
    let old = Task { try await tooOld.provider.authCode(for: makeRequest("in-2")) }
    _ = await readEvents(&tooOldEvents) { $0 == .opened(requestID: "in-2") }
    tooOld.provider.deliver(InsideResult(code: "account_open_auth_4002", fields: ["state": "in-2"]))
    await #expect(throws: AuthCoordinatorError(.alipayTooOld)) { try await old.value }
  }

  @Test func everySubscriberSeesEventsAndNoneShowsTheCode() async throws {
    let rig = Rig(.authorize(code: "NEVER-SHOWN", echoID: true), deliverDuringOpen: true)
    var first = rig.provider.events.makeAsyncIterator()
    var second = rig.provider.events.makeAsyncIterator()
    _ = try await rig.provider.authCode(for: makeRequest("ev"))
    rig.router.handle(Callback.success("ev", code: "NEVER-SHOWN"))
    let expected: [BridgeEvent] = [
      .callbackMatched(requestID: "ev"), .opened(requestID: "ev"),
      .callbackRejected(reason: .duplicate, requestID: "ev"),
    ]
    for index in 0..<2 {
      var seen: [BridgeEvent] = []
      for _ in expected {
        let event = index == 0 ? await first.next() : await second.next()
        if let event { seen.append(event) }
      }
      #expect(seen == expected)
      #expect(!seen.contains { String(describing: $0).contains("NEVER-SHOWN") })
    }
  }

  @Test func unknownRequestIDsInEventsAreClipped() {
    let rig = Rig(.noCallback)
    let long = String(repeating: "x", count: 500)
    let match = rig.router.handle(Callback.success(long))
    guard case .authResult(.rejected(.unknownRequestID, let shown?)) = match else {
      Issue.record("unexpected \(match)")
      return
    }
    #expect(shown.count <= 65)
  }
}
