import AlipayBridge
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import LoopbackTokenServer
import Testing

/// The vendor guide's own flow ("iOS 小程序接入账户通", `getOnlineTokenWithMode:callback:`),
/// end to end through the coordinator:
///
/// ```
/// opens ─▶ AuthCoordinator ─▶ AlipayAuthorizer
///   InsideAuthCodeProvider ── start(request, completion) ──▶ FAKE INSIDE SDK (the test)
///                          ◀── completion(result dictionary) ─┘
///   HTTPTokenExchanger ── HTTP POST ──▶ real python3 token server on 127.0.0.1
/// ```
///
/// The fake SDK answers as the guide shows: `account_open_auth_9000` with only `auth_code` and
/// `app_id` under the result key, no `state`. Time is a `ManualClock`; nothing sleeps.
final class InsideRig: @unchecked Sendable {
  static let codeKey = "ANXProductConfigResultCode"
  static let resultKey = "ANXProductConfigResult"

  let key = AccountKey(mcUid: "merchant-\(UUID().uuidString.prefix(8))")
  let clock = ManualClock()
  let server: TokenServer
  let echoID = UUID().uuidString
  let store = InMemoryTokenStore()
  let provider: InsideAuthCodeProvider
  let coordinator: AuthCoordinator
  /// Calls of `provider.authCode(for:)` made by the authorizer, and how each ended.
  let codeRequests = Ledger()
  let exchanges = Ledger()
  /// Runs the opens ``opens(_:)`` starts, so that a test can await them parking.
  let callers = CallerTracker()
  private let startStream: AsyncStream<InsideCompletion>
  private let startCount = Ledger()

  init(authorizationTimeout: Duration = .seconds(120)) throws {
    server = try TokenServer.running()
    let (stream, continuation) = AsyncStream.makeStream(of: InsideCompletion.self)
    startStream = stream
    let startCount = self.startCount
    provider = InsideAuthCodeProvider(
      scheme: "mpaasinsidedemo", codeKey: Self.codeKey, resultKey: Self.resultKey, clock: clock,
      authURL: { _ in "https://integrator.example/alipay/auth" },
      start: { _, completion in  // FAKE INSIDE SDK: the test plays the completion block
        startCount.start()
        continuation.yield(completion)
      })
    let exchanger = HTTPTokenExchanger(
      endpoint: server.url("/echo"), encoding: .postForm, parameters: ["echo_id": echoID],
      timeout: .seconds(60), now: clock.dateSource)
    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: authorizationTimeout, exchangeTimeout: .seconds(30))
    configuration.clock = clock
    configuration.now = clock.dateSource
    coordinator = AuthCoordinator(
      store: store,
      authorizer: AlipayAuthorizer(
        provider: ObservedProvider(inner: provider, ledger: codeRequests),
        exchanger: ObservedExchanger(inner: exchanger, ledger: exchanges)),
      configuration: configuration)
  }

  /// How many times the Inside service was started.
  var starts: Int { startCount.calls }

  /// `count` concurrent mini-program opens.
  func opens(_ count: Int) -> [Task<AuthModel, any Error>] {
    let (coordinator, key) = (self.coordinator, self.key)
    return (0..<count).map { _ in callers.task { try await coordinator.authModel(for: key) } }
  }

  /// Waits until `count` callers are parked on the key's flight: parking emits no event, so the
  /// condition is checked each time one of the opens stops running (``CallerTracker``).
  func waitForWaiters(_ count: Int, fileID: String = #fileID, line: Int = #line) async throws {
    let coordinator = self.coordinator
    try await callers.waitUntil(fileID: fileID, line: line) {
      coordinator.statistics.waitingCallers >= count
    }
  }

  /// The completion of the next start of the Inside service.
  func nextStart() async -> InsideCompletion {
    var iterator = startStream.makeAsyncIterator()
    return await iterator.next()!
  }

  /// The dictionary the SDK hands its completion block.
  static func result(_ code: String, _ fields: [String: String] = [:]) -> [AnyHashable: Any] {
    [AnyHashable(codeKey): code, AnyHashable(resultKey): fields as [AnyHashable: Any]]
  }
}

@Suite("End to end: the Inside SDK completion path", .timeLimit(.minutes(5)))
struct InsideEndToEndTests {
  @Test("the guide's 9000 result (auth_code and app_id only) serves every waiter")
  func guideSuccessServesEveryWaiter() async throws {
    let rig = try InsideRig()
    let opens = rig.opens(500)
    let completion = await rig.nextStart()
    try await rig.waitForWaiters(500)
    #expect(rig.starts == 1)

    let match = completion.complete(
      InsideRig.result(
        "account_open_auth_9000", ["auth_code": "INSIDE-CODE-1", "app_id": "2021000000000001"]),
      error: nil)
    #expect(match.isMatched)

    var models: [AuthModel] = []
    for open in opens { models.append(try await open.value) }
    #expect(models.count == 500)
    #expect(Set(models).count == 1)
    let model = try #require(models.first)
    #expect(model.uid == TokenServer.userID)
    #expect(model.mcUid == rig.key.mcUid)
    #expect(rig.exchanges.outcomes == ["success"])
    #expect(rig.coordinator.statistics.coalescedCallers == 499)

    // The real server received the code from the completion, for this user.
    let (status, record) = try await rig.server.get("/record?id=\(rig.echoID)")
    #expect(status == 200)
    let params = record["params"] as? [String: String] ?? [:]
    #expect(params["auth_code"] == "INSIDE-CODE-1")
    #expect(params["mc_uid"] == rig.key.mcUid)

    // The SDK calling its block again completes nothing and exchanges nothing.
    #expect(
      completion.complete(InsideRig.result("account_open_auth_9000", ["auth_code": "AGAIN"]))
        == .rejected(reason: .duplicate, requestID: completion.requestID))
    #expect(rig.exchanges.calls == 1)
    #expect(try await rig.coordinator.authModel(for: rig.key) == model)
    #expect(rig.starts == 1)
  }

  @Test(
    "failure codes reach every waiter with their mapped codes; nothing is cached",
    arguments: [
      ("account_open_auth_6000", "user_cancelled"),
      ("account_open_auth_4002", "alipay_too_old"),
      ("account_open_auth_5000", "abandoned"),
      ("account_open_auth_1234", "authorization_failed"),
    ])
  func failureCodesReachEveryWaiter(code: String, expected: String) async throws {
    let rig = try InsideRig()
    let opens = rig.opens(100)
    let completion = await rig.nextStart()
    try await rig.waitForWaiters(100)
    #expect(completion.complete(InsideRig.result(code), error: nil).isMatched)
    #expect(await outcomes(opens) == Array(repeating: expected, count: 100))
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)
  }

  @Test("a completion that never comes ends at the authorization deadline")
  func missingCompletionEndsAtTheDeadline() async throws {
    let rig = try InsideRig(authorizationTimeout: .seconds(120))
    let opens = rig.opens(50)
    let completion = await rig.nextStart()
    try await rig.waitForWaiters(50)
    await rig.clock.waitForSleepers(1)  // the coordinator's authorization deadline

    rig.clock.advance(by: .seconds(119))
    #expect(rig.coordinator.statistics.waitingCallers == 50)
    rig.clock.advance(by: .seconds(1))
    #expect(await outcomes(opens) == Array(repeating: "timed_out", count: 50))
    // The provider's call was cancelled. How it ended is no event: await the rig's ledger. The
    // provider forgets the request before that call ends.
    #expect(try await rig.codeRequests.outcomes(afterEnding: 1) == ["cancelled"])
    #expect(rig.provider.pendingRequestIDs.isEmpty)

    // The SDK's "授权超时失败" arriving minutes later is late: no exchange, nothing cached.
    #expect(
      completion.complete(InsideRig.result("account_open_auth_9000", ["auth_code": "LATE"]))
        == .rejected(reason: .late, requestID: completion.requestID))
    #expect(rig.exchanges.calls == 0)
    #expect(await rig.store.model(for: rig.key) == nil)
  }
}
