import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import AlipayBridge

/// A stand-in for `[[ANXInsideService sharedService] startServiceWithModel:completion:]`: every
/// start is handed to the test, which plays the SDK and calls the completion.
struct FakeInsideStarter {
  typealias Start = (request: InsideAuthRequest, completion: InsideCompletion)
  let starts: AsyncStream<Start>
  let starter: InsideAuthCodeProvider.Starter

  init() {
    let (stream, continuation) = AsyncStream.makeStream(of: Start.self)
    starts = stream
    starter = { request, completion in continuation.yield((request, completion)) }
  }
}

/// The SDK's completion dictionary, as the guide reads it: the code under the code key, the
/// fields under the result key.
func insideDictionary(
  _ code: String, _ fields: [String: String] = [:], codeKey: String = "resultCode",
  resultKey: String = "result"
) -> [AnyHashable: Any] {
  [AnyHashable(codeKey): code, AnyHashable(resultKey): fields as [AnyHashable: Any]]
}

@Suite(.timeLimit(.minutes(2))) struct InsideAuthCodeProviderTests {
  let clock = ManualClock()
  let fake = FakeInsideStarter()
  let provider: InsideAuthCodeProvider

  init() {
    provider = InsideAuthCodeProvider(
      scheme: "mpaasinsidedemo", codeKey: "ANXResultCode", resultKey: "ANXResult", clock: clock,
      authURL: { request in "https://integrator.example/auth?u=\(request.key.mcUid)" },
      start: fake.starter)
  }

  private func started(_ id: String) async -> (
    Task<AuthCode, any Error>, FakeInsideStarter.Start
  ) {
    let provider = provider
    let task = Task { try await provider.authCode(for: makeRequest(id)) }
    var starts = fake.starts.makeAsyncIterator()
    let start = await starts.next()!
    return (task, start)
  }

  @Test("the guide's 9000 result, auth_code and app_id without state, completes the request")
  func guideSuccessResultCompletes() async throws {
    let (task, start) = await started("r1")
    #expect(start.request.requestID == "r1")
    #expect(start.request.scheme == "mpaasinsidedemo")
    #expect(start.request.authURL == "https://integrator.example/auth?u=u1")
    #expect(start.request.thirdAuth)
    #expect(start.request.phoneNumber == nil)
    #expect(provider.pendingRequestIDs == ["r1"])
    let match = start.completion.complete(
      insideDictionary(
        "account_open_auth_9000", ["auth_code": "CODE-9000", "app_id": "2021000000000001"],
        codeKey: "ANXResultCode", resultKey: "ANXResult"),
      error: nil)
    #expect(match == .matched(requestID: "r1"))
    let code = try await task.value
    #expect(code.value == "CODE-9000")
    #expect(code.appID == "2021000000000001")
    #expect(provider.pendingRequestIDs.isEmpty)
  }

  @Test(
    "each failure code reaches the waiter with its mapped error",
    arguments: [
      ("account_open_auth_6000", AuthCoordinatorError.Code.userCancelled),
      ("account_open_auth_4002", .alipayTooOld),
      ("account_open_auth_5000", .abandoned),
      ("account_open_auth_8000", .authorizationFailed),
      ("account_open_auth_7777", .authorizationFailed),
      ("something_else", .authorizationFailed),
    ])
  func failureCodesAreMapped(code: String, expected: AuthCoordinatorError.Code) async throws {
    let (task, start) = await started("r-\(code)")
    let match = start.completion.complete(
      insideDictionary(code, codeKey: "ANXResultCode", resultKey: "ANXResult"))
    #expect(match.isMatched)
    await #expect(throws: AuthCoordinatorError(expected)) { try await task.value }
  }

  @Test func nineThousandWithoutAnAuthCodeFails() async throws {
    let (task, start) = await started("r")
    start.completion.complete(
      insideDictionary(
        "account_open_auth_9000", ["app_id": "2021"], codeKey: "ANXResultCode",
        resultKey: "ANXResult"))
    await #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try await task.value }
  }

  @Test func anErrorWithoutAResultFails() async throws {
    let (task, start) = await started("r")
    let error = NSError(domain: "ANXInsideService", code: -1)
    #expect(start.completion.complete(nil, error: error).isMatched)
    await #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try await task.value }
  }

  @Test("a second completion is reported as duplicate and changes nothing")
  func secondCompletionIsDuplicate() async throws {
    var events = provider.events.makeAsyncIterator()
    let (task, start) = await started("r")
    start.completion.complete(InsideResult(code: "account_open_auth_6000"))
    let second = start.completion.complete(
      InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "LATE"]))
    #expect(second == .rejected(reason: .duplicate, requestID: "r"))
    await #expect(throws: AuthCoordinatorError(.userCancelled)) { try await task.value }
    let seen = await readEvents(&events) {
      $0 == .callbackRejected(reason: .duplicate, requestID: "r")
    }
    #expect(seen == [.opened(requestID: "r"), .callbackMatched(requestID: "r"), seen.last!])
  }

  @Test("cancelling the task fails the wait at once; the completion after it is late")
  func cancellationFailsThePendingWait() async throws {
    let (task, start) = await started("r")
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(provider.pendingRequestIDs.isEmpty)
    let late = start.completion.complete(
      InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "LATE"]))
    #expect(late == .rejected(reason: .late, requestID: "r"))
  }

  @Test("a starter that completes synchronously, before returning, is served")
  func synchronousCompletion() async throws {
    let provider = InsideAuthCodeProvider(
      scheme: "s", authURL: { _ in "u" },
      start: { _, completion in
        completion.complete(
          InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "S"]))
      })
    #expect(try await provider.authCode(for: makeRequest("r")).value == "S")
  }

  @Test("a failing auth URL builder is rethrown and starts nothing")
  func builderErrorIsRethrown() async throws {
    struct SigningDown: Error {}
    let calls = Recorder<String>()
    let provider = InsideAuthCodeProvider(
      scheme: "s", authURL: { _ in throw SigningDown() },
      start: { request, _ in calls.append(request.requestID) })
    await #expect(throws: SigningDown.self) { try await provider.authCode(for: makeRequest("r")) }
    #expect(calls.all.isEmpty)
  }

  @Test("returning without a completion ends as abandoned after the grace period")
  func returnWithoutCompletionIsAbandoned() async throws {
    let (task, start) = await started("r")
    provider.appDidBecomeActive()
    await clock.waitForSleepers(1)
    clock.advance(by: .milliseconds(2999))
    #expect(provider.pendingRequestIDs == ["r"])
    clock.advance(by: .milliseconds(1))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await task.value }
    #expect(
      start.completion.complete(InsideResult(code: "account_open_auth_6000"))
        == .rejected(reason: .late, requestID: "r"))
  }

  @Test("a grace period too long for the clock (\"never\") is clamped instead of trapping")
  func hugeGracePeriodDoesNotTrap() async throws {
    let fake = FakeInsideStarter()
    let provider = InsideAuthCodeProvider(
      scheme: "mpaasinsidedemo", returnGracePeriod: .seconds(Int64.max),
      authURL: { _ in "https://integrator.example/auth" }, start: fake.starter)
    #expect(provider.returnGracePeriod < .seconds(Int64.max), "clamped to what a clock can sleep")
    let task = Task { try await provider.authCode(for: makeRequest("r")) }
    var starts = fake.starts.makeAsyncIterator()
    let start = await starts.next()!
    provider.appDidBecomeActive()  // arms a real ContinuousClock sleep of the grace period
    start.completion.complete(
      InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "LATE-BUT-OK"]))
    #expect(try await task.value.value == "LATE-BUT-OK")
  }

  @Test("a completion within the grace period wins; resigning active disarms the timer")
  func completionWithinGraceWins() async throws {
    let (task, start) = await started("r")
    provider.appDidBecomeActive()
    await clock.waitForSleepers(1)
    provider.appWillResignActive()
    clock.advance(by: .seconds(10))
    #expect(provider.pendingRequestIDs == ["r"])
    provider.appDidBecomeActive()
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(2))
    start.completion.complete(
      InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "IN-TIME"]))
    #expect(try await task.value.value == "IN-TIME")
    clock.advance(by: .seconds(10))
    #expect(clock.sleeperCount == 0)
  }

  @Test("neither events nor descriptions show the auth code")
  func noSecretInEvents() async throws {
    var events = provider.events.makeAsyncIterator()
    let (task, start) = await started("r")
    start.completion.complete(
      InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "SECRET-CODE"]))
    let code = try await task.value
    let seen = await readEvents(&events) { $0 == .callbackMatched(requestID: "r") }
    let texts = seen.map { "\($0)" } + ["\(code)", "\(start.request)"]
    #expect(!texts.contains { $0.contains("SECRET-CODE") })
  }
}
