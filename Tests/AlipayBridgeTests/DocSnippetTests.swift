import AlipayBridge
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

// The code snippets of the DocC articles in Sources/AlipayBridge/Documentation.docc, as tests, so
// they cannot rot. Each test names its article; keep the two in step. Snippets that need UIKit,
// the Inside SDK or the mPaaS SDK are shown in the articles only; everything they call is
// exercised here.

/// Collects values from `@Sendable` callbacks.
private final class SnippetRecorder<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: [Value] = []

  func append(_ value: Value) { lock.withLock { stored.append(value) } }
  var values: [Value] { lock.withLock { stored } }
}

// MARK: - IntegratingInAnIOSApp.md (the delegate)

/// The shape of the mPaaS delegate call, minus the SDK types: the article's
/// `authModelForMode:extendParams:callback:` implementation calls exactly this.
final class ContainerAuthBridge: Sendable {
  let coordinator: AuthCoordinator
  let currentUser: @Sendable () -> String?

  init(coordinator: AuthCoordinator, currentUser: @escaping @Sendable () -> String?) {
    self.coordinator = coordinator
    self.currentUser = currentUser
  }

  /// Answers the container exactly once, whatever happens.
  func authModel(
    mode: String,
    extendParams: [AnyHashable: Any]?,
    callback: @escaping @Sendable (Result<AuthModel, any Error>) -> Void
  ) {
    guard let mcUid = currentUser() else {
      callback(.failure(AuthCoordinatorError(.signedOut, "no user is logged in")))
      return
    }
    let key = AccountKey(mcUid: mcUid, mode: AuthMode(rawValue: mode))
    // Read the dictionary here, synchronously: it is not Sendable.
    let refresh = RefreshPolicy(extendParams: extendParams)
    let coordinator = self.coordinator
    Task {
      do {
        callback(.success(try await coordinator.authModel(for: key, refresh: refresh)))
      } catch {
        callback(.failure(error))
      }
    }
  }
}

/// A ``TokenExchanger`` made from a closure (an app would use ``HTTPTokenExchanger``).
private struct SnippetExchanger: TokenExchanger {
  let body: @Sendable (AuthCode, AuthorizationRequest) async throws -> AuthModel

  func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel {
    try await body(code, request)
  }
}

/// Plays Alipay: when the app opens an authorization URL, it "returns" to the app with a
/// `safepay` callback naming the request id found in the URL's `state`.
private final class SnippetAlipay: @unchecked Sendable {
  private let lock = NSLock()
  private var routerStorage: AlipayCallbackRouter?
  var router: AlipayCallbackRouter? {
    get { lock.withLock { routerStorage } }
    set { lock.withLock { routerStorage = newValue } }
  }

  func open(_ url: URL) -> Bool {
    let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
    guard let state = items.first(where: { $0.name == "state" })?.value else { return false }
    Task { [router] in _ = router?.handle(Self.callback(requestID: state)) }
    return true
  }

  static func callback(requestID: String) -> URL {
    let result =
      "success=true&result_code=200&app_id=2021000000000001&auth_code=CODE-1"
      + "&user_id=2088000000000001&target_id=\(requestID)"
    let object: [String: Any] = [
      "memo": ["result": result, "ResultStatus": "9000", "memo": ""],
      "requestType": "safepay",
    ]
    let json = String(
      decoding: try! JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    var allowed = CharacterSet.alphanumerics
    allowed.insert(charactersIn: "-._~")
    let query = json.addingPercentEncoding(withAllowedCharacters: allowed)!
    return URL(string: "myapp://safepay/?\(query)")!
  }
}

@Suite(.timeLimit(.minutes(2))) struct BridgeDocSnippetTests {
  // MARK: GettingStartedWithAlipay.md

  @Test func gettingStartedApp() async throws {
    let alipay = SnippetAlipay()
    let codes = SnippetRecorder<String>()

    let provider = AlipayAuthCodeProvider(
      authURL: { request in
        // Your server signs this URL; the request id travels as `state` (or `target_id`).
        URL(string: "https://example.com/alipay/auth?state=\(request.requestID)")!
      },
      open: { url in alipay.open(url) })  // UIApplication.shared.open(url) in an app
    let exchanger = SnippetExchanger { code, request in
      codes.append(code.value)
      return AuthModel(uid: code.userID ?? "", accessToken: "t1", mcUid: request.key.mcUid)
    }
    let coordinator = AuthCoordinator(
      authorizer: AlipayAuthorizer(provider: provider, exchanger: exchanger),
      configuration: .init(authorizationTimeout: .seconds(120)))
    let router = AlipayCallbackRouter(provider: provider, appSchemes: ["myapp"])
    alipay.router = router

    let model = try await coordinator.authModel(for: AccountKey(mcUid: "u1"))

    #expect(model.accessToken == "t1")
    #expect(model.uid == "2088000000000001")
    #expect(codes.values == ["CODE-1"])
    #expect(provider.pendingRequestIDs.isEmpty)
    #expect(router.handle(URL(string: "https://example.com/")!) == .notOurs)
  }

  @Test func gettingStartedInsideApp() async throws {
    let codes = SnippetRecorder<String>()
    let payments = SnippetRecorder<String>()
    let starts = SnippetRecorder<String>()

    let provider = InsideAuthCodeProvider(
      scheme: "mpaasinsidedemo",  // the mPaaS container scheme
      authURL: { request in "https://example.com/inside/auth?u=\(request.key.mcUid)" },
      start: { request, completion in
        // Plays the Inside SDK: the guide's 9000 result holds auth_code and app_id, no state.
        starts.append("\(request.scheme) \(request.authURL) \(request.thirdAuth)")
        completion.complete([
          "resultCode": "account_open_auth_9000",
          "result": ["auth_code": "INSIDE-CODE", "app_id": "2021000000000001"],
        ])
      })
    let exchanger = SnippetExchanger { code, request in
      codes.append(code.value)
      return AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: request.key.mcUid)
    }
    let coordinator = AuthCoordinator(
      authorizer: AlipayAuthorizer(provider: provider, exchanger: exchanger),
      configuration: .init(authorizationTimeout: .seconds(120)))
    let router = AlipayCallbackRouter(
      appSchemes: ["myapp"],
      payment: { url in payments.append(url.absoluteString) })

    let model = try await coordinator.authModel(for: AccountKey(mcUid: "u1"))
    #expect(model.accessToken == "t1")
    #expect(codes.values == ["INSIDE-CODE"])
    #expect(starts.values == ["mpaasinsidedemo https://example.com/inside/auth?u=u1 true"])
    let payment = URL(string: "myapp://safepay/?ResultStatus=9000")!
    #expect(router.handle(payment).isHandled)
    #expect(payments.values == [payment.absoluteString])
  }

  @Test func gettingStartedHTTPExchanger() throws {
    let exchanger = HTTPTokenExchanger(
      endpoint: URL(string: "https://api.example.com/alipay/token")!,
      encoding: .postJSON,
      headers: ["X-App-Version": "4.2"])
    #expect(exchanger.codeParameter == "auth_code")
    #expect(exchanger.mcUidParameter == "mc_uid")
    #expect(exchanger.timeout == .seconds(5))
    _ = AlipayAuthorizer(
      provider: AlipayAuthCodeProvider(authURL: { _ in exchanger.endpoint }, open: { _ in false }),
      exchanger: exchanger)
  }

  @Test func bridgeCodesArriveAsTheyAre() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let key = AccountKey(mcUid: "u1")

    let task = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().fail(with: AuthCoordinatorError(.userCancelled, "tapped cancel"))
    do {
      _ = try await task.value
      Issue.record("expected an error")
    } catch let error as AuthCoordinatorError where error.code == .userCancelled {
      #expect(error.code.rawValue == "user_cancelled")
    }
  }

  @Test func bridgeCodesKeepTheirStableNames() {
    let expected: [(AuthCoordinatorError.Code, String)] = [
      (.userCancelled, "user_cancelled"), (.alipayTooOld, "alipay_too_old"),
      (.networkError, "network_error"), (.exchangeFailed, "exchange_failed"),
      (.invalidCallback, "invalid_callback"),
    ]
    for (code, raw) in expected { #expect(code.rawValue == raw) }
    let core: Set<AuthCoordinatorError.Code> = [
      .timedOut, .authorizationFailed, .abandoned, .refreshLoop, .signedOut, .storeFailed,
    ]
    #expect(Set(expected.map(\.0)).count == expected.count)
    #expect(core.isDisjoint(with: expected.map(\.0)))
  }

  // MARK: IntegratingInAnIOSApp.md (the delegate)

  @Test func delegateAnswersOnceAndReadsNeedRefreshToken() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let bridge = ContainerAuthBridge(coordinator: coordinator, currentUser: { "u1" })

    let answers = AsyncStream.makeStream(of: Result<AuthModel, any Error>.self)
    bridge.authModel(mode: "platformOnly", extendParams: nil) { answers.continuation.yield($0) }
    let call = await authorizer.nextCall()
    #expect(call.key == AccountKey(mcUid: "u1", mode: .platformOnly))
    call.succeed(with: AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: "u1"))
    var iterator = answers.stream.makeAsyncIterator()
    #expect(try await iterator.next()?.get().accessToken == "t1")

    // The container rejects t1: NeedRefreshToken = YES (any key case, YES/true/1).
    bridge.authModel(mode: "platformOnly", extendParams: ["NeedRefreshToken": "YES"]) {
      answers.continuation.yield($0)
    }
    let refresh = await authorizer.nextCall()
    #expect(refresh.reason == .forcedRefresh)
    refresh.succeed(with: AuthModel(uid: "2088000000000001", accessToken: "t2", mcUid: "u1"))
    #expect(try await iterator.next()?.get().accessToken == "t2")

    // Failures are answered too: the container never hangs.
    bridge.authModel(mode: "platformOnly", extendParams: ["needReAuth": true]) {
      answers.continuation.yield($0)
    }
    await authorizer.nextCall().fail(with: AuthCoordinatorError(.userCancelled))
    let failure = try #require(await iterator.next())
    #expect(throws: AuthCoordinatorError(.userCancelled)) { try failure.get() }
  }

  @Test func delegateWithoutAUserFailsAtOnce() async throws {
    let coordinator = AuthCoordinator(authorizer: ScriptedAuthorizer())
    let bridge = ContainerAuthBridge(coordinator: coordinator, currentUser: { nil })
    let answers = SnippetRecorder<Result<AuthModel, any Error>>()
    bridge.authModel(mode: "platformOnly", extendParams: nil) { answers.append($0) }
    #expect(answers.values.count == 1)
    #expect(throws: AuthCoordinatorError(.signedOut)) { try answers.values[0].get() }
  }

  @Test func extendParamsOverloadAndRefreshPolicy() async throws {
    #expect(RefreshPolicy(extendParams: ["NeedRefreshToken": "YES"]) == .force(rejecting: nil))
    #expect(RefreshPolicy(extendParams: ["needopenauth": 1]) == .force(rejecting: nil))
    #expect(RefreshPolicy(extendParams: ["NeedRefreshToken": false]) == .ifNeeded)
    #expect(RefreshPolicy(extendParams: nil) == .ifNeeded)
    #expect(
      RefreshPolicy(extendParams: ["NeedRefreshToken": true], rejectedToken: "t1")
        == .force(rejecting: "t1"))

    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let key = AccountKey(mcUid: "u1")
    let first = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: "u1"))
    let model = try await first.value

    let fresh = Task {
      try await coordinator.authModel(for: key, refresh: .force(rejecting: model.accessToken))
    }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "t2", mcUid: "u1"))
    #expect(try await fresh.value.accessToken == "t2")

    // Rejecting a token that is no longer cached returns the cached one, without authorizing.
    let same = try await coordinator.authModel(for: key, extendParams: ["NeedRefreshToken": "no"])
    #expect(same.accessToken == "t2")
    #expect(try await coordinator.authModel(for: key, refresh: .force(rejecting: "t1")) == same)
    #expect(authorizer.callCount == 2)
  }
}
