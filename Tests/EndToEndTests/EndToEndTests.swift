import AlipayBridge
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import LoopbackTokenServer
import Testing

/// The coordinator, the Alipay bridge and the HTTP exchanger together (see ``EndToEndRig``):
/// a SIMULATED ALIPAY APP in process, a SIMULATED INTEGRATOR SERVER that is real HTTP on
/// 127.0.0.1, everything else the library's real code. Time moves only on the manual clock.
@Suite("End to end: coordinator + bridge + exchanger", .timeLimit(.minutes(5)))
struct EndToEndTests {
  @Test("1,000 concurrent opens: one bounce, one callback, one exchange, one model for all")
  func thousandOpensShareOneAuthorization() async throws {
    let rig = try EndToEndRig()
    let recorder = EventRecorder(rig.coordinator)
    var coordinatorEvents = rig.coordinator.events.makeAsyncIterator()
    var bridgeEvents = rig.provider.events.makeAsyncIterator()

    let opens = rig.miniProgramOpens(1_000)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(1_000)
    #expect(rig.alipay.openCount == 1)
    #expect(!bounce.targetID.isEmpty)
    #expect(rig.provider.pendingRequestIDs == [bounce.targetID])

    // The user authorizes in the simulated Alipay app, which opens the host app with ONE URL;
    // the app delegate hands it to the real router.
    let (callback, code) = rig.alipay.authorizedCallback(for: bounce)
    #expect(rig.appOpened(callback) == .authResult(.matched(requestID: bounce.targetID)))

    var models: [AuthModel] = []
    for open in opens { models.append(try await open.value) }
    #expect(models.count == 1_000)
    #expect(Set(models).count == 1)
    let model = try #require(models.first)
    #expect(model.uid == TokenServer.userID)
    #expect(model.mcUid == rig.key.mcUid)
    let servesServerToken = model.accessToken == TokenServer.token
    #expect(servesServerToken, "not the server's token")
    #expect(model.expiresAt == rig.clock.date.addingTimeInterval(TokenServer.expiresIn))

    // Exactly one of everything.
    #expect(rig.alipay.openCount == 1)
    #expect(rig.codeRequests.outcomes == ["success"])
    #expect(rig.exchanges.outcomes == ["success"])
    // The flight resumes its waiters before it counts itself succeeded; the event comes after.
    try await recorder.first { if case .flightSucceeded = $0 { true } else { false } }
    let stats = rig.coordinator.statistics
    #expect(stats.authorizationsStarted == 1)
    #expect(stats.flightsSucceeded == 1)
    #expect(stats.coalescedCallers == 999)

    // The real server received the code the simulated Alipay issued, for this user.
    let params = try await rig.serverRecord()
    let receivedIssuedCode = params["auth_code"] == code
    #expect(receivedIssuedCode, "the server did not receive the issued auth code")
    #expect(params["mc_uid"] == rig.key.mcUid)

    // Persisted before the waiters resumed; the next open is a cache hit without a bounce.
    #expect(await rig.store.model(for: rig.key) == model)
    #expect(try await rig.coordinator.authModel(for: rig.key) == model)
    #expect(rig.alipay.openCount == 1)

    // Alipay (or an attacker) replays the callback: a duplicate, no second exchange.
    #expect(
      rig.appOpened(callback)
        == .authResult(.rejected(reason: .duplicate, requestID: bounce.targetID)))
    #expect(rig.exchanges.calls == 1)

    // The events tell the same story and never show the code or the token.
    let secrets = [code, TokenServer.token]
    let seen = await readUntil(&coordinatorEvents) {
      if case .flightSucceeded = $0 { return true }
      return false
    }
    let served = seen.compactMap { event -> Int? in
      if case .flightSucceeded(rig.key, _, let waiters) = event { return waiters }
      return nil
    }
    #expect(served == [1_000])
    let bridgeSeen = await readUntil(&bridgeEvents) {
      $0 == .callbackRejected(reason: .duplicate, requestID: bounce.targetID)
    }
    #expect(bridgeSeen.first == .opened(requestID: bounce.targetID))
    #expect(bridgeSeen.contains(.callbackMatched(requestID: bounce.targetID)))
    let texts = seen.map { "\($0)" } + bridgeSeen.map { "\($0)" } + ["\(model)", "\(stats)"]
    #expect(!texts.contains { leaks($0, secrets) }, "an event or description shows a secret")
  }

  @Test("the user returns without a callback: everyone gets .abandoned; the next open bounces")
  func returnWithoutCallbackAbandonsEveryWaiter() async throws {
    let rig = try EndToEndRig()
    let opens = rig.miniProgramOpens(200)
    let first = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(200)

    // The user switches back to the host app without acting in Alipay: no URL arrives.
    rig.provider.appDidBecomeActive()
    await rig.clock.waitForSleepers(2)  // the coordinator's deadline + the grace timer
    rig.clock.advance(by: .seconds(2))
    #expect(rig.provider.pendingRequestIDs == [first.targetID])
    #expect(rig.coordinator.statistics.waitingCallers == 200)
    rig.clock.advance(by: .seconds(1))  // past the 3 s grace period

    #expect(await outcomes(opens) == Array(repeating: "abandoned", count: 200))
    #expect(rig.codeRequests.outcomes == ["abandoned"])
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)

    // Alipay calls back after all: too late, it completes nothing and exchanges nothing.
    let (late, _) = rig.alipay.authorizedCallback(for: first)
    #expect(
      rig.appOpened(late) == .authResult(.rejected(reason: .late, requestID: first.targetID)))
    #expect(rig.exchanges.calls == 0)

    // The next open bounces again, with a new request id, and can succeed.
    let retry = rig.miniProgramOpens(1)
    let second = await rig.alipay.nextBounce()
    #expect(rig.alipay.openCount == 2)
    #expect(second.targetID != first.targetID)
    rig.appOpened(rig.alipay.authorizedCallback(for: second).url)
    let model = try await retry[0].value
    #expect(model.uid == TokenServer.userID)
    #expect(rig.exchanges.outcomes == ["success"])
  }

  @Test("forged callbacks complete nothing; the genuine one still completes")
  func forgedCallbackCompletesNothing() async throws {
    let rig = try EndToEndRig()
    let opens = rig.miniProgramOpens(100)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(100)

    // FORGED: a well-formed success naming another request, one naming none, and a cancel
    // naming another request.
    let wrongID = "forged-\(UUID().uuidString)"
    #expect(
      rig.appOpened(rig.alipay.forgedCallback(targetID: wrongID))
        == .authResult(.rejected(reason: .unknownRequestID, requestID: wrongID)))
    #expect(
      rig.appOpened(rig.alipay.forgedCallback(targetID: nil))
        == .authResult(.rejected(reason: .missingRequestID, requestID: nil)))
    let forgedCancel = SimulatedAlipayApp.safepay(
      status: "6001", result: SimulatedAlipayApp.result(code: nil, targetID: wrongID))
    #expect(
      rig.appOpened(forgedCancel)
        == .authResult(.rejected(reason: .unknownRequestID, requestID: wrongID)))

    // Nobody was completed, failed or exchanged for.
    #expect(rig.provider.pendingRequestIDs == [bounce.targetID])
    #expect(rig.coordinator.statistics.waitingCallers == 100)
    #expect(rig.codeRequests.outcomes.isEmpty)
    #expect(rig.exchanges.calls == 0)

    // The genuine callback still completes every waiter, with the genuine code.
    let (genuine, code) = rig.alipay.authorizedCallback(for: bounce)
    #expect(rig.appOpened(genuine) == .authResult(.matched(requestID: bounce.targetID)))
    #expect(await outcomes(opens) == Array(repeating: "success", count: 100))
    #expect(rig.exchanges.calls == 1)
    let params = try await rig.serverRecord()
    let receivedGenuineCode = params["auth_code"] == code
    #expect(receivedGenuineCode, "the server did not receive the genuine auth code")
  }

  @Test("the authorization deadline times everyone out and cancels the provider's wait")
  func authorizationDeadlineCancelsProviderWait() async throws {
    let rig = try EndToEndRig(authorizationTimeout: .seconds(120))
    let opens = rig.miniProgramOpens(50)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(50)
    await rig.clock.waitForSleepers(1)  // the coordinator's authorization deadline

    rig.clock.advance(by: .seconds(119))
    #expect(rig.coordinator.statistics.waitingCallers == 50)
    rig.clock.advance(by: .seconds(1))

    #expect(await outcomes(opens) == Array(repeating: "timed_out", count: 50))
    #expect(rig.coordinator.statistics.flightsTimedOut == 1)
    // The provider's wait for the callback was cancelled, not left parked. How its call ended is
    // no event: await the rig's ledger. The provider forgets the request before that call ends.
    #expect(try await rig.codeRequests.outcomes(afterEnding: 1) == ["cancelled"])
    #expect(rig.provider.pendingRequestIDs.isEmpty)

    // A callback after the deadline is late: it completes nothing and exchanges nothing.
    let (late, _) = rig.alipay.authorizedCallback(for: bounce)
    #expect(
      rig.appOpened(late) == .authResult(.rejected(reason: .late, requestID: bounce.targetID)))
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)

    // The next open bounces again.
    let retry = rig.miniProgramOpens(1)
    _ = await rig.alipay.nextBounce()
    #expect(rig.alipay.openCount == 2)
    retry[0].cancel()
    #expect(await outcomes(retry) == ["cancelled"])
  }

  @Test("the exchange deadline cancels the HTTP request the server holds")
  func exchangeDeadlineCancelsTheHTTPRequest() async throws {
    // The server sleeps 20 s (server side) before answering; the test never waits for it.
    let rig = try EndToEndRig(
      route: "/slow", query: ["delay": "20"], authorizationTimeout: .seconds(600),
      exchangeTimeout: .seconds(30))
    let opens = rig.miniProgramOpens(50)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(50)
    rig.appOpened(rig.alipay.authorizedCallback(for: bounce).url)
    let (status, _) = try await rig.server.get("/arrived?id=\(rig.echoID)&wait=10")
    #expect(status == 200, "the exchange never reached the server")

    let events = EventRecorder(rig.coordinator)
    rig.clock.advance(by: .seconds(30))
    #expect(await outcomes(opens) == Array(repeating: "timed_out", count: 50))
    // How the exchanger's call ended is no event: await the rig's ledger. The cancelled
    // exchange's result is discarded with `.lateResultDiscarded`, emitted after it is counted.
    #expect(try await rig.exchanges.outcomes(afterEnding: 1) == ["cancelled"])
    try await events.first { $0.isLateResultDiscarded }
    #expect(rig.coordinator.statistics.lateResultsDiscarded == 1)
    #expect(await rig.store.model(for: rig.key) == nil)
  }

  @Test("logout mid-flight: everyone gets .signedOut; the late callback is rejected")
  func logoutWhileTheUserIsInAlipay() async throws {
    let rig = try EndToEndRig()
    let opens = rig.miniProgramOpens(100)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(100)

    await rig.coordinator.accountStatusChanged(.logout(mcUid: rig.key.mcUid))
    #expect(await outcomes(opens) == Array(repeating: "signed_out", count: 100))
    #expect(rig.statusChanges.outcomes == ["\(AccountStatusChange.logout(mcUid: rig.key.mcUid))"])
    // How the provider's call ended is no event: await the rig's ledger.
    #expect(try await rig.codeRequests.outcomes(afterEnding: 1) == ["cancelled"])

    // The user authorizes in Alipay after all: the callback is late and ignored.
    let (late, _) = rig.alipay.authorizedCallback(for: bounce)
    #expect(
      rig.appOpened(late) == .authResult(.rejected(reason: .late, requestID: bounce.targetID)))
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)

    // The next open bounces again instead of serving anything.
    let retry = rig.miniProgramOpens(1)
    _ = await rig.alipay.nextBounce()
    #expect(rig.alipay.openCount == 2)
    retry[0].cancel()
    #expect(await outcomes(retry) == ["cancelled"])
  }

  @Test("logout while the exchange is on the wire: .signedOut, the result is discarded")
  func logoutDuringTheExchange() async throws {
    let rig = try EndToEndRig(route: "/slow", query: ["delay": "20"])
    let opens = rig.miniProgramOpens(100)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(100)
    rig.appOpened(rig.alipay.authorizedCallback(for: bounce).url)
    let (status, _) = try await rig.server.get("/arrived?id=\(rig.echoID)&wait=10")
    #expect(status == 200, "the exchange never reached the server")

    let events = EventRecorder(rig.coordinator)
    await rig.coordinator.accountStatusChanged(.logout(mcUid: rig.key.mcUid))
    #expect(await outcomes(opens) == Array(repeating: "signed_out", count: 100))
    // How the exchanger's call ended is no event: await the rig's ledger. The cancelled
    // exchange's result is discarded with `.lateResultDiscarded`, emitted after it is counted.
    #expect(try await rig.exchanges.outcomes(afterEnding: 1) == ["cancelled"])
    try await events.first { $0.isLateResultDiscarded }
    #expect(rig.coordinator.statistics.lateResultsDiscarded == 1)
    #expect(await rig.store.model(for: rig.key) == nil)

    let retry = rig.miniProgramOpens(1)
    _ = await rig.alipay.nextBounce()
    #expect(rig.alipay.openCount == 2)
    retry[0].cancel()
    #expect(await outcomes(retry) == ["cancelled"])
  }

  @Test("the user cancels in Alipay (6001): .userCancelled for everyone, nothing cached")
  func userCancelsInAlipay() async throws {
    let rig = try EndToEndRig()
    let opens = rig.miniProgramOpens(100)
    let bounce = await rig.alipay.nextBounce()
    try await rig.waitForWaiters(100)

    let cancel = rig.alipay.cancelledCallback(for: bounce)
    #expect(rig.appOpened(cancel) == .authResult(.matched(requestID: bounce.targetID)))
    #expect(await outcomes(opens) == Array(repeating: "user_cancelled", count: 100))
    #expect(rig.codeRequests.outcomes == ["user_cancelled"])
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)

    // Failures are not cached: the next open bounces again, and the user may say yes now.
    let retry = rig.miniProgramOpens(1)
    let second = await rig.alipay.nextBounce()
    #expect(rig.alipay.openCount == 2)
    rig.appOpened(rig.alipay.authorizedCallback(for: second).url)
    #expect(await outcomes(retry) == ["success"])
    #expect(rig.exchanges.outcomes == ["success"])
  }
}

/// Reads events until `predicate` holds; returns everything read.
func readUntil<Event: Sendable>(
  _ iterator: inout AsyncStream<Event>.Iterator, _ predicate: (Event) -> Bool
) async -> [Event] {
  var seen: [Event] = []
  while let event = await iterator.next() {
    seen.append(event)
    if predicate(event) { break }
  }
  return seen
}
