import AlipayBridge
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import LoopbackTokenServer
import Testing

/// Collects a bridge's answers; lets a test await the n-th without polling.
final class Answers: @unchecked Sendable {
  private let lock = NSLock()
  private var answers: [ContainerAnswer] = []
  private var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []

  var all: [ContainerAnswer] { lock.withLock { answers } }

  /// The reply closure to pass to ``ContainerAuthBridge/answer(mode:extendParams:reply:)``.
  var reply: @Sendable (ContainerAnswer) -> Void {
    { [self] answer in
      let ready = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
        answers.append(answer)
        let ready = watchers.filter { $0.count <= answers.count }.map(\.continuation)
        watchers.removeAll { $0.count <= answers.count }
        return ready
      }
      for continuation in ready { continuation.resume() }
    }
  }

  /// Waits until `count` answers arrived; returns the last one.
  func wait(for count: Int) async -> ContainerAnswer {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = lock.withLock { () -> Bool in
        if answers.count >= count { return true }
        watchers.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
    return lock.withLock { answers[count - 1] }
  }
}

/// The compiled code of Sources/AlipayBridge/Documentation.docc/IntegratingInAnIOSApp.md, exercised.
@Suite(
  "Sources/AlipayBridge/Documentation.docc/IntegratingInAnIOSApp.md snippets",
  .timeLimit(.minutes(5)))
struct IntegrationGuideSnippetsTests {
  /// A bridge over a coordinator with a scripted authorizer on a manual clock.
  struct BridgeHarness {
    let clock = ManualClock()
    let authorizer = ScriptedAuthorizer()
    let coordinator: AuthCoordinator
    let bridge: ContainerAuthBridge
    let answers = Answers()

    init(user: String? = "merchant-1") {
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
      configuration.clock = clock
      configuration.now = clock.dateSource
      coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
      bridge = ContainerAuthBridge(coordinator: coordinator, currentUser: { user })
    }

    func ask(_ extendParams: [AnyHashable: Any]? = nil) {
      bridge.answer(mode: .platformOnly, extendParams: extendParams, reply: answers.reply)
    }
  }

  static func model(_ token: String) -> AuthModel {
    AuthModel(uid: "2088000000000001", accessToken: token, mcUid: "merchant-1")
  }

  @Test("the delegate bridge answers once per call: fetch, cache hit, NeedRefreshToken")
  func bridgeAnswersOncePerCall() async throws {
    let h = BridgeHarness()
    h.ask()
    await h.authorizer.nextCall().succeed(with: Self.model("token-1"))
    #expect(await h.answers.wait(for: 1) == .model(Self.model("token-1")))

    h.ask(["NeedRefreshToken": false])  // served from the cache
    #expect(await h.answers.wait(for: 2) == .model(Self.model("token-1")))
    #expect(h.authorizer.callCount == 1)

    // The container rejects the token it was given: a new authorization, then a new token.
    h.ask(["NeedRefreshToken": "YES"])
    let call = await h.authorizer.nextCall()
    #expect(call.reason == .forcedRefresh)
    call.succeed(with: Self.model("token-2"))
    #expect(await h.answers.wait(for: 3) == .model(Self.model("token-2")))
    #expect(h.answers.all.count == 3)
  }

  @Test("the delegate bridge answers once on every failure path, with errorMsg")
  func bridgeAnswersOnceOnFailures() async throws {
    // No signed-in host-app user: answered at once, Alipay never involved.
    let anonymous = BridgeHarness(user: nil)
    anonymous.ask()
    #expect(
      await anonymous.answers.wait(for: 1)
        == .failure(errorMsg: "signed_out: no host-app user is signed in"))
    #expect(anonymous.authorizer.callCount == 0)

    // The user cancelled in Alipay.
    let h = BridgeHarness()
    h.ask()
    await h.authorizer.nextCall().fail(with: AuthCoordinatorError(.userCancelled, "6001"))
    #expect(await h.answers.wait(for: 1) == .failure(errorMsg: "user_cancelled: 6001"))

    // Logout while the user is in Alipay.
    h.ask()
    _ = await h.authorizer.nextCall()
    await h.coordinator.accountStatusChanged(.logout(mcUid: "merchant-1"))
    guard case .failure(let signedOut) = await h.answers.wait(for: 2) else {
      Issue.record("expected a failure")
      return
    }
    #expect(signedOut.hasPrefix("signed_out: "))

    // The authorization deadline.
    h.ask()
    _ = await h.authorizer.nextCall()
    await h.clock.waitForSleepers(1)
    h.clock.advance(by: .seconds(120))
    guard case .failure(let timedOut) = await h.answers.wait(for: 3) else {
      Issue.record("expected a failure")
      return
    }
    #expect(timedOut.hasPrefix("timed_out: "))
    #expect(h.answers.all.count == 3)
  }

  @Test("errorMsg carries the stable code and never a secret")
  func errorMessages() {
    #expect(ContainerAuthBridge.errorMsg(for: AuthCoordinatorError(.refreshLoop)) == "refresh_loop")
    #expect(
      ContainerAuthBridge.errorMsg(for: AuthCoordinatorError(.alipayTooOld, "4002"))
        == "alipay_too_old: 4002")
    #expect(ContainerAuthBridge.errorMsg(for: CancellationError()) == "cancelled")
    struct Opaque: Error { var secret = "AUTHCODE-LEAK" }
    #expect(ContainerAuthBridge.errorMsg(for: Opaque()) == "authorization_failed")
  }

  @Test("the Inside wiring of the guide: one authorization and one exchange serve every open")
  func insideWiringWorksEndToEnd() async throws {
    let server = try TokenServer.running()
    let scheme = SimulatedAlipayApp.appScheme  // the guide: one scheme for container and app
    let (starts, started) = AsyncStream.makeStream(of: (InsideAuthRequest, InsideCompletion).self)
    let startLedger = Ledger()
    let payments = Ledger()
    let accountConnects = Ledger()
    let notified = Ledger()
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("integration-guide-inside-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeURL = directory.appendingPathComponent("tokens.store")
    let connect = InsideAccountConnect(
      storeURL: storeURL,
      tokenEndpoint: server.url("/ok"),  // SIMULATED INTEGRATOR SERVER = REAL HTTP ON LOOPBACK
      refreshEndpoint: server.url("/authorization-required"),  // its "the user must authorize"
      containerScheme: scheme,
      makeAuthURL: { mcUid in "https://integrator.example/alipay/auth?user=\(mcUid)" },
      startInside: { request, completion in  // FAKE INSIDE SDK: the test plays its completion
        startLedger.start()
        started.yield((request, completion))
      },
      appSchemes: [scheme],
      accountConnectURL: { url in accountConnects.end(url.absoluteString) },
      paymentURL: { url in payments.end(url.absoluteString) },
      notifySDK: { change in notified.end("\(change)") })
    let key = AccountKey(mcUid: "merchant-\(UUID().uuidString.prefix(8))")
    let coordinator = connect.coordinator
    var nextStart = starts.makeAsyncIterator()

    // 300 mini-programs open at once: the Inside service is started once, with the guide's model.
    // Tracked, so that the test can await the opens parking (which emits no event).
    let callers = CallerTracker()
    let opens = (0..<300).map { _ in callers.task { try await coordinator.authModel(for: key) } }
    // A flight that fails before it starts the SDK (a store load past its deadline on a loaded
    // machine) ends the stream, so that the test fails instead of waiting forever for a start.
    let endsOnFailure = { (task: Task<AuthModel, any Error>) in
      Task { if case .failure = await task.result { started.finish() } }
    }
    _ = endsOnFailure(opens[0])
    let (request, completion) = try #require(await nextStart.next())
    try await callers.waitUntil { coordinator.statistics.waitingCallers >= 300 }
    #expect(startLedger.calls == 1)
    #expect(request.key == key)
    #expect(request.scheme == scheme)
    #expect(request.thirdAuth)
    #expect(request.phoneNumber == nil)
    #expect(request.authURL == "https://integrator.example/alipay/auth?user=\(key.mcUid)")

    // The guide's result: account_open_auth_9000 with only auth_code and app_id, under the
    // default keys (InsideResult.defaultCodeKey / defaultResultKey).
    let code = "INSIDE-GUIDE-\(UUID().uuidString)"
    let result: [AnyHashable: Any] = [
      InsideResult.defaultCodeKey: "account_open_auth_9000",
      InsideResult.defaultResultKey: ["auth_code": code, "app_id": "2021000000000001"],
    ]
    #expect(completion.complete(result, error: nil).isMatched)

    var models: [AuthModel] = []
    for open in opens { models.append(try await open.value) }
    #expect(models.count == 300)
    #expect(Set(models).count == 1)
    let model = try #require(models.first)
    #expect(model.uid == TokenServer.userID)
    #expect(model.mcUid == key.mcUid)
    #expect(coordinator.statistics.authorizationsStarted == 1)
    #expect(coordinator.statistics.coalescedCallers == 299)
    #expect(startLedger.calls == 1)

    // Exactly one exchange reached the real server, with the completion's code, for this user.
    let exchanges = try await server.receivedRequests().filter { "\($0)".contains(code) }
    #expect(exchanges.count == 1)
    #expect(exchanges.first?["path"] as? String == "/ok")
    #expect((exchanges.first?["body"] as? String)?.contains("mc_uid=\(key.mcUid)") == true)
    #expect(FileManager.default.fileExists(atPath: storeURL.path))
    #expect(try await coordinator.authModel(for: key) == model)  // cached: no new start
    #expect(startLedger.calls == 1)

    // The router reads no auth result: every safepay URL reaches the payment hook, even one
    // shaped like an auth result naming this request.
    let safepay = SimulatedAlipayApp.safepay(
      status: "9000",
      result: SimulatedAlipayApp.result(code: "URL-CODE", targetID: request.requestID))
    #expect(connect.router.handle(safepay) == .payment)
    let inside = URL(string: "\(scheme)://platformapi.inside.com/callback")!
    #expect(connect.router.handle(inside) == .accountConnect)
    #expect(connect.router.handle(URL(string: "https://example.com/")!) == .notOurs)
    #expect(payments.outcomes == [safepay.absoluteString])
    #expect(accountConnects.outcomes == [inside.absoluteString])
    #expect(completion.complete(result, error: nil).isMatched == false)  // duplicate: ignored
    #expect(try await server.receivedRequests().filter { "\($0)".contains(code) }.count == 1)

    // Logout clears memory and store and tells the SDK; the next open starts the SDK again.
    await connect.userLoggedOut(mcUid: key.mcUid)
    #expect(notified.outcomes == ["\(AccountStatusChange.logout(mcUid: key.mcUid))"])
    #expect(try await FileTokenStore(url: storeURL).model(for: key) == nil)
    let again = Task { try await coordinator.authModel(for: key) }
    _ = endsOnFailure(again)
    let (_, secondCompletion) = try #require(await nextStart.next())
    #expect(startLedger.calls == 2)
    let cancelled: [AnyHashable: Any] = [InsideResult.defaultCodeKey: "account_open_auth_6000"]
    #expect(secondCompletion.complete(cancelled, error: nil).isMatched)
    #expect(await outcomes([again]) == ["user_cancelled"])
    started.finish()
  }

  @Test("the wiring of the guide works end to end (simulated Alipay, loopback server)")
  func wiringWorksEndToEnd() async throws {
    let server = try TokenServer.running()
    let alipay = SimulatedAlipayApp()  // SIMULATED ALIPAY APP
    let notified = Ledger()
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("integration-guide-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeURL = directory.appendingPathComponent("tokens.store")
    let connect = AccountConnect(
      storeURL: storeURL,
      tokenEndpoint: server.url("/ok"),  // SIMULATED INTEGRATOR SERVER = REAL HTTP ON LOOPBACK
      refreshEndpoint: server.url("/authorization-required"),  // its "the user must authorize"
      signAuthURL: { requestID in
        // SIMULATED INTEGRATOR SIGNING (local): your server signs this URL.
        var components = URLComponents(string: "alipays://platformapi/startapp?appId=20000067")!
        components.queryItems! += [URLQueryItem(name: "target_id", value: requestID)]
        return components.url!
      },
      open: { url in await alipay.open(url) },
      appSchemes: [SimulatedAlipayApp.appScheme],
      notifySDK: { change in
        notified.start()
        notified.end("\(change)")
      })
    let bridge = ContainerAuthBridge(coordinator: connect.coordinator) { "merchant-1" }
    let answers = Answers()

    bridge.answer(mode: .platformOnly, extendParams: nil, reply: answers.reply)
    let bounce = await alipay.nextBounce()
    #expect(connect.router.handle(alipay.authorizedCallback(for: bounce).url).isHandled)
    guard case .model(let model) = await answers.wait(for: 1) else {
      Issue.record("expected a model")
      return
    }
    #expect(model.uid == TokenServer.userID)
    #expect(model.mcUid == "merchant-1")
    #expect(FileManager.default.fileExists(atPath: storeURL.path))
    #expect(connect.router.handle(URL(string: "https://example.com/")!) == .notOurs)

    await connect.userLoggedOut(mcUid: "merchant-1")
    #expect(notified.outcomes == ["\(AccountStatusChange.logout(mcUid: "merchant-1"))"])
    let reopened = FileTokenStore(url: storeURL)
    #expect(try await reopened.model(for: AccountKey(mcUid: "merchant-1")) == nil)

    // After the logout the next container call bounces to Alipay again.
    bridge.answer(mode: .platformOnly, extendParams: nil, reply: answers.reply)
    let again = await alipay.nextBounce()
    #expect(alipay.openCount == 2)
    connect.router.handle(alipay.cancelledCallback(for: again))
    #expect(
      await answers.wait(for: 2)
        == .failure(
          errorMsg: "user_cancelled: "
            + "Alipay ResultStatus \(SafepayResultStatus.userCancelled): 用户取消"))
  }

  @Test("every `<!-- snippet: NAME -->` block of the guide is the compiled code")
  func guideSnippetsMatchCompiledCode() throws {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let source = try String(
      contentsOf: here.appendingPathComponent("IntegrationGuideSnippets.swift"), encoding: .utf8)
    let guide = try String(
      contentsOf: here.appendingPathComponent(
        "../../Sources/AlipayBridge/Documentation.docc/IntegratingInAnIOSApp.md"
      ).standardizedFileURL,
      encoding: .utf8)
    let compiled = Self.regions(in: source)
    #expect(
      compiled.keys.sorted() == ["account-status", "container-bridge", "wiring", "wiring-inside"])
    let documented = Self.guideBlocks(in: guide)
    #expect(documented.keys.sorted() == compiled.keys.sorted())
    for (name, code) in compiled {
      #expect(
        documented[name] == code,
        "Sources/AlipayBridge/Documentation.docc/IntegratingInAnIOSApp.md snippet \(name) is out of date"
      )
    }
  }

  /// `// snippet: NAME` ... `// end-snippet` regions.
  static func regions(in source: String) -> [String: String] {
    var regions: [String: String] = [:]
    var current: (name: String, lines: [Substring])?
    for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
      if line.hasPrefix("// snippet: ") {
        current = (String(line.dropFirst("// snippet: ".count)), [])
      } else if line == "// end-snippet", let region = current {
        regions[region.name] = region.lines.joined(separator: "\n")
        current = nil
      } else {
        current?.lines.append(line)
      }
    }
    return regions
  }

  /// The ```swift block following each `<!-- snippet: NAME -->` line.
  static func guideBlocks(in guide: String) -> [String: String] {
    var blocks: [String: String] = [:]
    let lines = guide.split(separator: "\n", omittingEmptySubsequences: false)
    var index = 0
    while index < lines.count {
      let line = lines[index]
      index += 1
      guard line.hasPrefix("<!-- snippet: "), line.hasSuffix(" -->") else { continue }
      let name = String(line.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
      guard index < lines.count, lines[index] == "```swift" else { continue }
      index += 1
      var body: [Substring] = []
      while index < lines.count, lines[index] != "```" {
        body.append(lines[index])
        index += 1
      }
      blocks[name] = body.joined(separator: "\n")
    }
    return blocks
  }

  @Test("`authcoord doctor` runs the Info.plist checks")
  func doctorCommandLineChecksThePlist() async throws {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let fixture = here.appendingPathComponent(
      "../AppConfigDoctorTests/Fixtures/placeholders.plist"
    ).standardizedFileURL
    let run = try await AuthcoordProcess.run(["doctor", fixture.path, "--scheme", "myapp"])
    #expect(run.status == 1)
    #expect(run.out.contains("error: MPAuthIdentity.instBizSceneCode"))
  }

  /// `authcoord`, next to the test bundle in the build directory.
  static func authcoordExecutable() -> URL? {
    var directory = Bundle.main.bundleURL
    for _ in 0..<4 {
      let candidate = directory.appendingPathComponent("authcoord")
      var isDirectory: ObjCBool = false
      if FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isDirectory),
        !isDirectory.boolValue, FileManager.default.isExecutableFile(atPath: candidate.path)
      {
        return candidate
      }
      directory.deleteLastPathComponent()
    }
    return nil
  }
}
