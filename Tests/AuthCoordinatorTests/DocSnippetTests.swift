import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

// The code snippets of the DocC articles in Sources/AuthCoordinator/Documentation.docc, as tests,
// so they cannot rot. Each test names its article; keep the two in step. The Alipay bridge's
// articles (Sources/AlipayBridge/Documentation.docc) have theirs in
// Tests/AlipayBridgeTests/DocSnippetTests.swift.

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

  func removeModels(forAccount account: String) async throws {
    models = models.filter { $0.key.account != account }
  }

  func removeAll() async throws {
    models.removeAll()
  }
}

@Suite(.timeLimit(.minutes(2))) struct DocSnippetTests {
  // MARK: GettingStarted.md

  @Test func gettingStartedService() async throws {
    let backend = SnippetBackend()

    let authorizer = ClosureAuthorizer(isInteractive: false) { request in
      await backend.model(for: request.key.account)
    }
    let coordinator = AuthCoordinator(store: InMemoryTokenStore(), authorizer: authorizer)

    let key = AccountKey(account: "reports-service")
    let model = try await coordinator.authModel(for: key)  // authorizes
    let again = try await coordinator.authModel(for: key)  // served from memory

    #expect(model.accessToken == "token-1")
    #expect(model.account == "reports-service")
    #expect(!authorizer.isInteractive)
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
    let authorizer = ClosureAuthorizer { request in await backend.model(for: request.key.account) }

    let issues = SnippetRecorder<TokenStoreError>()
    let store = FileTokenStore(url: storeURL, onIssue: { issue in issues.append(issue) })
    let first = AuthCoordinator(store: store, authorizer: authorizer)
    let model = try await first.authModel(for: AccountKey(account: "u1"))

    // A new launch: a new store on the same file, a new coordinator.
    let relaunched = AuthCoordinator(store: FileTokenStore(url: storeURL), authorizer: authorizer)
    #expect(try await relaunched.authModel(for: AccountKey(account: "u1")) == model)
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

  // MARK: TimeoutsCancellationAndLogout.md

  @Test func aCallersOwnTimeoutAffectsOnlyThatCaller() async throws {
    let clock = ManualClock()
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(authorizer: authorizer, configuration: configuration)
    let key = AccountKey(account: "u1")

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
    let task = Task { try await coordinator.authModel(for: AccountKey(account: "u1")) }
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
    let key = AccountKey(account: "u1")
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
    await coordinator.accountStatusChanged(.logout(account: "u1"))

    await #expect(throws: AuthCoordinatorError(.signedOut)) { try await waiting.value }
    #expect(store.snapshot.isEmpty)
    #expect(changes.values == [.logout(account: "u1")])
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
    let key = AccountKey(account: "u1")

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
    let key = AccountKey(account: "u1")

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
    let key = AccountKey(account: "u1")
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
    let otherMode = AccountKey(account: "u1", mode: "another")
    let otherUser = AccountKey(account: "u2")
    try await store.save(stored, for: otherMode)
    try await store.save(
      AuthModel(uid: "2088000000000002", accessToken: "u2", mcUid: "u2"), for: otherUser)
    await coordinator.accountStatusChanged(.logout(account: "u1"))
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
    let key = AccountKey(account: "u1")

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
    let key = AccountKey(account: "u1")

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
