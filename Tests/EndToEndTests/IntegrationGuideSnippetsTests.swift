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

/// The compiled code of docs/integration.md, exercised.
@Suite("docs/integration.md snippets")
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
      contentsOf: here.appendingPathComponent("../../docs/integration.md").standardizedFileURL,
      encoding: .utf8)
    let compiled = Self.regions(in: source)
    #expect(compiled.keys.sorted() == ["account-status", "container-bridge", "wiring"])
    let documented = Self.guideBlocks(in: guide)
    #expect(documented.keys.sorted() == compiled.keys.sorted())
    for (name, code) in compiled {
      #expect(documented[name] == code, "docs/integration.md snippet \(name) is out of date")
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
  func doctorCommandLineChecksThePlist() throws {
    let here = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    let fixture = here.appendingPathComponent(
      "../AppConfigDoctorTests/Fixtures/placeholders.plist"
    ).standardizedFileURL
    let binary = try #require(Self.authcoordExecutable(), "authcoord was not built")
    let process = Process()
    process.executableURL = binary
    process.arguments = ["doctor", fixture.path, "--scheme", "myapp"]
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let text = String(
      decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    #expect(process.terminationStatus == 1)
    #expect(text.contains("error: MPAuthIdentity.instBizSceneCode"))
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
