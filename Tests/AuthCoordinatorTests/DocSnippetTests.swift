import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

// The code snippets of the DocC articles in Sources/AuthCoordinator/Documentation.docc, as tests,
// so they cannot rot. Each test names its article; keep the two in step. Snippets that need
// UIKit or the mPaaS SDK are shown in the articles only; everything they call is exercised here.

/// A stand-in for the integrator's backend: hands out numbered tokens and counts its calls.
private actor SnippetBackend {
  private(set) var calls = 0

  func model(for mcUid: String) -> AuthModel {
    calls += 1
    return AuthModel(
      uid: "2088000000000001", accessToken: "token-\(calls)", mcUid: mcUid,
      expiresAt: Date().addingTimeInterval(15 * 24 * 3600))
  }
}

/// Collects values from `@Sendable` callbacks.
private final class SnippetRecorder<Value: Sendable>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: [Value] = []

  func append(_ value: Value) { lock.withLock { stored.append(value) } }
  var values: [Value] { lock.withLock { stored } }
}

// MARK: - WritingYourOwnTokenStore.md

/// A ``TokenStore`` kept in an actor's dictionary (the article's example).
actor DictionaryTokenStore: TokenStore {
  private var models: [AccountKey: AuthModel] = [:]

  func model(for key: AccountKey) async throws -> AuthModel? {
    models[key]
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    models[key] = model
  }

  func removeModel(for key: AccountKey) async throws {
    models[key] = nil
  }

  func removeModels(forMcUid mcUid: String) async throws {
    models = models.filter { $0.key.mcUid != mcUid }
  }

  func removeAll() async throws {
    models.removeAll()
  }
}

// MARK: - ReplacingTheMPaaSDelegate.md

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

@Suite(.timeLimit(.minutes(2))) struct DocSnippetTests {
  // MARK: GettingStarted.md

  @Test func gettingStartedService() async throws {
    let backend = SnippetBackend()

    let authorizer = ClosureAuthorizer { request in
      await backend.model(for: request.key.mcUid)
    }
    let coordinator = AuthCoordinator(store: InMemoryTokenStore(), authorizer: authorizer)

    let key = AccountKey(mcUid: "u1")
    let model = try await coordinator.authModel(for: key)  // authorizes
    let again = try await coordinator.authModel(for: key)  // served from memory

    #expect(model.accessToken == "token-1")
    #expect(again == model)
    #expect(await backend.calls == 1)
    #expect(coordinator.statistics.cacheHits == 1)
    #expect(coordinator.statistics.authorizationsStarted == 1)
  }

  @Test func gettingStartedFileStoreSurvivesARestart() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appending(path: "DocSnippetTests-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let storeURL = directory.appending(path: "auth/tokens.store")
    let backend = SnippetBackend()
    let authorizer = ClosureAuthorizer { request in await backend.model(for: request.key.mcUid) }

    let issues = SnippetRecorder<TokenStoreError>()
    let store = FileTokenStore(url: storeURL, onIssue: { issue in issues.append(issue) })
    let first = AuthCoordinator(store: store, authorizer: authorizer)
    let model = try await first.authModel(for: AccountKey(mcUid: "u1"))

    // A new launch: a new store on the same file, a new coordinator.
    let relaunched = AuthCoordinator(store: FileTokenStore(url: storeURL), authorizer: authorizer)
    #expect(try await relaunched.authModel(for: AccountKey(mcUid: "u1")) == model)
    #expect(await backend.calls == 1)
    #expect(issues.values.isEmpty)
  }

  @Test func gettingStartedConfiguration() {
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.maxForcedAuthorizations = 2
    configuration.whenAbandoned = .finishAndCache

    #expect(configuration.authorizationTimeout == .seconds(120))
    #expect(configuration.exchangeTimeout == .seconds(30))
    #expect(configuration.refreshLeeway == .seconds(60))
    #expect(configuration.loopWindow == .seconds(60))
    #expect(configuration.maxIdleKeys == 10_000)
    #expect(configuration.storeTimeout == .seconds(10))
  }

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

  // MARK: ReplacingTheMPaaSDelegate.md

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

  // MARK: TimeoutsCancellationAndLogout.md

  @Test func aCallersOwnTimeoutAffectsOnlyThatCaller() async throws {
    let clock = ManualClock()
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
    let key = AccountKey(mcUid: "u1")

    let patient = Task { try await coordinator.authModel(for: key) }
    let call = await authorizer.nextCall()
    let hasty = Task { try await coordinator.authModel(for: key, timeout: .seconds(10)) }
    await clock.waitForSleepers(2)  // the flight's deadline and the hasty caller's own
    clock.advance(by: .seconds(10))

    await #expect(throws: AuthCoordinatorError(.timedOut)) { try await hasty.value }
    #expect(!call.isCancelled)  // the flight goes on for the patient caller
    call.succeed(with: AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: "u1"))
    #expect(try await patient.value.accessToken == "t1")
  }

  @Test func cancellingTheOnlyCallerCancelsTheAuthorizer() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let task = Task { try await coordinator.authModel(for: AccountKey(mcUid: "u1")) }
    let call = await authorizer.nextCall()

    task.cancel()

    await #expect(throws: CancellationError.self) { try await task.value }
    await call.waitUntilCancelled()  // default AbandonPolicy: .cancel
  }

  @Test func logoutFailsWaitersClearsTheStoreAndCallsTheHook() async throws {
    let store = InMemoryTokenStore()
    let authorizer = ScriptedAuthorizer()
    let changes = SnippetRecorder<AccountStatusChange>()
    let coordinator = AuthCoordinator(
      store: store, authorizer: authorizer,
      onAccountStatusChange: { change in
        changes.append(change)  // tell the mPaaS SDK: MCAccountLogout / MCAccountUnbind
      })
    let key = AccountKey(mcUid: "u1")
    let first = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: "u1"))
    _ = try await first.value
    #expect(store.snapshot[key] != nil)

    // A forced refresh is in flight when the user logs out.
    let waiting = Task {
      try await coordinator.authModel(for: key, refresh: .force(rejecting: nil))
    }
    let call = await authorizer.nextCall()
    await coordinator.accountStatusChanged(.logout(mcUid: "u1"))

    await #expect(throws: AuthCoordinatorError(.signedOut)) { try await waiting.value }
    #expect(store.snapshot.isEmpty)
    #expect(changes.values == [.logout(mcUid: "u1")])
    // The old flight's result, arriving late, is discarded.
    call.succeed(with: AuthModel(uid: "2088000000000001", accessToken: "t2", mcUid: "u1"))
    let next = Task { try await coordinator.authModel(for: key) }
    let fresh = await authorizer.nextCall()
    #expect(fresh.reason == .missing)
    fresh.succeed(with: AuthModel(uid: "2088000000000002", accessToken: "t3", mcUid: "u1"))
    #expect(try await next.value.accessToken == "t3")
  }

  // MARK: GettingStarted.md, handling errors and observing

  @Test func errorsHaveStableCodesAndAreNotCached() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let key = AccountKey(mcUid: "u1")

    let first = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().fail(with: AuthCoordinatorError(.userCancelled, "tapped cancel"))
    do {
      _ = try await first.value
      Issue.record("expected an error")
    } catch let error as AuthCoordinatorError where error.code == .userCancelled {
      #expect(error.code.rawValue == "user_cancelled")
    }

    // Any other error from the authorizer becomes authorization_failed, the cause attached.
    struct BackendDown: Error {}
    let second = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().fail(with: BackendDown())
    do {
      _ = try await second.value
      Issue.record("expected an error")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .authorizationFailed)
      #expect(error.underlying is BackendDown)
    }
    #expect(authorizer.callCount == 2)  // the failure was not cached
  }

  @Test func eventsAndStatistics() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer)
    let events = coordinator.events  // subscribe before the work starts
    let key = AccountKey(mcUid: "u1")

    let task = Task { try await coordinator.authModel(for: key) }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "t1", mcUid: "u1"))
    _ = try await task.value

    var seen: [AuthEvent] = []
    for await event in events {
      seen.append(event)
      if case .flightSucceeded = event { break }
    }
    let started = seen.contains {
      if case .authorizationStarted(key, _, .missing) = $0 { true } else { false }
    }
    #expect(started)
    #expect(!seen.map { "\($0)" }.joined().contains("t1"))  // never a token

    let statistics = coordinator.statistics
    #expect(statistics.flightsStarted == statistics.flightsSucceeded + statistics.flightsInProgress)
    #expect(statistics.authorizationsStarted == 1)
  }

  // MARK: WritingYourOwnTokenStore.md

  @Test func aCustomStoreIsReadOnColdStartAndWrittenBeforeResume() async throws {
    let store = DictionaryTokenStore()
    let key = AccountKey(mcUid: "u1")
    let stored = AuthModel(uid: "2088000000000001", accessToken: "stored", mcUid: "u1")
    try await store.save(stored, for: key)

    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(store: store, authorizer: authorizer)
    #expect(try await coordinator.authModel(for: key).accessToken == "stored")
    #expect(authorizer.callCount == 0)

    let refresh = Task {
      try await coordinator.authModel(for: key, refresh: .force(rejecting: "stored"))
    }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "new", mcUid: "u1"))
    #expect(try await refresh.value.accessToken == "new")
    #expect(try await store.model(for: key)?.accessToken == "new")  // persisted before resume

    // A logout removes every mode of the user and nobody else's model.
    let otherMode = AccountKey(mcUid: "u1", mode: "another")
    let otherUser = AccountKey(mcUid: "u2")
    try await store.save(stored, for: otherMode)
    try await store.save(
      AuthModel(uid: "2088000000000002", accessToken: "u2", mcUid: "u2"), for: otherUser)
    await coordinator.accountStatusChanged(.logout(mcUid: "u1"))
    #expect(try await store.model(for: key) == nil)
    #expect(try await store.model(for: otherMode) == nil)
    #expect(try await store.model(for: otherUser)?.accessToken == "u2")
  }

  // MARK: TestingYourIntegration.md

  @Test func testKitCompleteExample() async throws {
    // 1. A manual clock drives every deadline; its date source drives token expiry.
    let clock = ManualClock()
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource

    // 2. A scripted authorizer: each call waits for the test to release it.
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
    let key = AccountKey(mcUid: "u1")

    // 3. Three concurrent callers cause one authorization.
    let callers = (0..<3).map { _ in Task { try await coordinator.authModel(for: key) } }
    let call = await authorizer.nextCall()
    #expect(call.reason == .missing)
    call.succeed(
      with: AuthModel(
        uid: "2088000000000001", accessToken: "t1", mcUid: "u1",
        expiresAt: clock.date.addingTimeInterval(3600)))
    for caller in callers { #expect(try await caller.value.accessToken == "t1") }
    #expect(authorizer.callCount == 1)

    // 4. An hour later (minus the 60 s leeway) the token counts as expired.
    clock.advance(by: .seconds(3600 - 60))
    let renewal = Task { try await coordinator.authModel(for: key) }
    let second = await authorizer.nextCall()
    #expect(second.reason == .expired)

    // 5. The user never comes back from Alipay: the deadline fails the caller and cancels
    //    the authorizer, without a single real second passing.
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(120))
    await #expect(throws: AuthCoordinatorError(.timedOut)) { try await renewal.value }
    await second.waitUntilCancelled()
  }

  @Test func testKitAwaitEventExample() async throws {
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(
      authorizer: authorizer,
      configuration: AuthCoordinator.Configuration(authorizationTimeout: .seconds(120)))
    let key = AccountKey(mcUid: "u1")

    // 1. Record first: the event stream only delivers what is emitted after it subscribed.
    let events = EventRecorder(coordinator)

    // 2. Act: the only caller gives up while the user is in Alipay.
    let caller = Task { try await coordinator.authModel(for: key) }
    let call = await authorizer.nextCall()
    caller.cancel()
    await #expect(throws: CancellationError.self) { try await caller.value }

    // 3. Await the event that says the flight was cancelled; no polling, no sleeping.
    try await events.first { event in
      if case .flightCancelled(key: key, flight: _, reason: .lastWaiterLeft) = event {
        true
      } else {
        false
      }
    }
    await call.waitUntilCancelled()

    // 4. Or await state the events drive: the condition is re-checked after each event.
    let retry = Task { try await coordinator.authModel(for: key) }
    try await events.waitUntil { coordinator.statistics.flightsStarted == 2 }
    await authorizer.nextCall().succeed(
      with: AuthModel(uid: "2088000000000001", accessToken: "t2", mcUid: "u1"))
    #expect(try await retry.value.accessToken == "t2")
  }
}
