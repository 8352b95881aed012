import AlipayBridge
import AuthCoordinator
import Foundation
import LoopbackTokenServer
import Testing

/// The README's iOS-app example, compiled and run: the Inside SDK is FAKED (it completes at once
/// with the vendor guide's `account_open_auth_9000` result), the exchange is real HTTP to the
/// python3 token server on 127.0.0.1 (its refresh endpoint answers 401 "authorization
/// required", so the silent stage leads to the bounce), the store is a real file. A second test checks that the
/// copy below is still the README's, so the front page cannot rot.
@Suite(.timeLimit(.minutes(1))) struct ReadmeAppExampleTests {
  /// FAKE INSIDE SDK: stands in for `ANXInsideService`, answering as the guide shows.
  enum InsideService {
    static func start(_ request: InsideAuthRequest, _ completion: InsideCompletion) {
      _ = completion.complete([
        InsideResult.defaultCodeKey: "account_open_auth_9000",
        InsideResult.defaultResultKey: ["auth_code": "README-CODE", "app_id": "2021000000000001"],
      ])
    }
  }

  /// Stands in for the reader's own server API.
  struct API: Sendable {
    func insideAuthURL(for mcUid: String) async throws -> String {
      "https://integrator.example/alipay/auth?user=\(mcUid)"
    }
  }

  @Test func theReadmeAppExampleRuns() async throws {
    let server = try TokenServer.running()
    let api = API()
    let tokenURL = server.url("/ok")
    // The SIMULATED server knows nothing of the user yet: "the user must authorize".
    let refreshURL = server.url("/authorization-required")
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("readme-app-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeURL = directory.appendingPathComponent("alipay-tokens")
    let currentUser = (id: "u1", name: "reader")
    let extendParams: [String: any Sendable] = ["NeedRefreshToken": "NO"]

    // --- from README.md ---
    let provider = InsideAuthCodeProvider(
      scheme: "mpaasinsidedemo",  // the mPaaS container scheme
      authURL: { request in try await api.insideAuthURL(for: request.key.mcUid) },
      start: { request, completion in InsideService.start(request, completion) })
    let exchanger = HTTPTokenExchanger(endpoint: tokenURL)  // your server: auth code -> token
    let refresher = HTTPTokenRefresher(endpoint: refreshURL)  // your server: refresh, or 401
    let coordinator = AuthCoordinator(
      store: FileTokenStore(url: storeURL),
      authorizer: SilentFirstAuthorizer(
        silent: refresher,  // tried first; a 5xx never bounces the user
        interactive: AlipayAuthorizer(provider: provider, exchanger: exchanger)),
      configuration: .init(authorizationTimeout: .seconds(120)))

    // In the delegate, however many mini-programs ask at once: one trip to Alipay for all of them.
    // `extendParams` carries the container's NeedRefreshToken.
    let model = try await coordinator.authModel(
      for: AccountKey(mcUid: currentUser.id), extendParams: extendParams)
    // The user logs out of your app: no late result can bring the old login back.
    await coordinator.accountStatusChanged(.logout(mcUid: currentUser.id))
    // --- end ---

    #expect(model.mcUid == "u1")
    #expect(!model.accessToken.isEmpty)
    #expect(coordinator.statistics.authorizationsStarted == 1)
    let reloaded = FileTokenStore(url: storeURL)
    #expect(
      try await reloaded.model(for: AccountKey(mcUid: "u1")) == nil, "logout cleared the file")
  }

  @Test func theSnippetIsTheReadmes() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let begin = try #require(source.range(of: "// --- from README.md ---\n"))
    let end = try #require(source.range(of: "    // --- end ---"))
    let copied = source[begin.upperBound..<end.lowerBound]
      .split(separator: "\n", omittingEmptySubsequences: false)
      .map { $0.hasPrefix("    ") ? $0.dropFirst(4) : $0 }.joined(separator: "\n")
    #expect(readme.contains(copied.trimmingCharacters(in: .newlines)))
  }
}
