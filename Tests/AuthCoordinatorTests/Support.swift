import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// A model for `mcUid` with token `token`, expiring `expiresIn` after `clock`'s date.
func makeModel(
  _ token: String, mcUid: String = "u1", clock: ManualClock? = nil, expiresIn: TimeInterval? = nil
) -> AuthModel {
  let expiresAt = expiresIn.map { (clock?.date ?? Date()).addingTimeInterval($0) }
  return AuthModel(uid: "2088000000000001", accessToken: token, mcUid: mcUid, expiresAt: expiresAt)
}

let u1 = AccountKey(account: "u1")
let u2 = AccountKey(account: "u2")

/// A coordinator wired to a manual clock and a scripted authorizer.
struct Harness {
  let clock = ManualClock()
  let authorizer: ScriptedAuthorizer
  let store: any TokenStore
  let coordinator: AuthCoordinator
  let statusChanges = LockedState<[AccountStatusChange]>([])
  /// Runs the callers ``request(_:refresh:timeout:)`` starts, so that a test can await them
  /// parking (``waitForWaiters(_:)``).
  let callers = CallerTracker()

  /// - Parameter silent: The authorizer says it never involves the user
  ///   (``Authorizer/isInteractive`` `false`): one deadline, and a loop guard that backs off.
  init(
    store: any TokenStore = InMemoryTokenStore(),
    ignoresCancellation: Bool = false,
    silent: Bool = false,
    configure: (inout AuthCoordinator.Configuration) -> Void = { _ in }
  ) {
    let authorizer = ScriptedAuthorizer(ignoresCancellation: ignoresCancellation)
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
    configuration.clock = clock
    configuration.now = clock.dateSource
    configure(&configuration)
    let changes = statusChanges
    self.authorizer = authorizer
    self.store = store
    self.coordinator = AuthCoordinator(
      store: store,
      authorizer: silent ? SilentAuthorizer(base: authorizer) as any Authorizer : authorizer,
      configuration: configuration,
      onAccountStatusChange: { change in changes.withLock { $0.append(change) } })
  }

  /// Starts a caller in its own task.
  func request(
    _ key: AccountKey = u1, refresh: RefreshPolicy = .ifNeeded, timeout: Duration? = nil
  ) -> Task<AuthModel, any Error> {
    let coordinator = self.coordinator
    return callers.task {
      try await coordinator.authModel(for: key, refresh: refresh, timeout: timeout)
    }
  }

  /// Waits until at least `count` callers are parked on flights.
  ///
  /// Parking on a flight is counted in the statistics but emits no event: the condition is
  /// checked again each time one of the callers started by ``request(_:refresh:timeout:)``
  /// stops running (``CallerTracker``). Throws when the watchdog expires first.
  func waitForWaiters(
    _ count: Int, fileID: String = #fileID, line: Int = #line
  ) async throws {
    let coordinator = self.coordinator
    try await callers.waitUntil(fileID: fileID, line: line) {
      coordinator.statistics.waitingCallers >= count
    }
  }

  var stats: AuthCoordinator.Statistics { coordinator.statistics }
}

/// A scripted authorizer that says it never involves the user, as a service's does.
struct SilentAuthorizer: Authorizer {
  let base: ScriptedAuthorizer
  var isInteractive: Bool { false }
  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    try await base.authorize(request)
  }
}

/// Expects `task` to throw an ``AuthCoordinatorError`` with `code`.
func expectFailure(
  _ task: Task<AuthModel, any Error>, _ code: AuthCoordinatorError.Code,
  sourceLocation: SourceLocation = #_sourceLocation
) async {
  do {
    let model = try await task.value
    Issue.record("expected \(code), got \(model)", sourceLocation: sourceLocation)
  } catch let error as AuthCoordinatorError {
    #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
  } catch {
    Issue.record("expected \(code), got \(error)", sourceLocation: sourceLocation)
  }
}

/// Expects `task` to throw `CancellationError`.
func expectCancelled(
  _ task: Task<AuthModel, any Error>, sourceLocation: SourceLocation = #_sourceLocation
) async {
  do {
    let model = try await task.value
    Issue.record("expected CancellationError, got \(model)", sourceLocation: sourceLocation)
  } catch {
    #expect(error is CancellationError, "got \(error)", sourceLocation: sourceLocation)
  }
}

/// A store that counts operations and can hold saves until the test releases them.
final class InstrumentedStore: TokenStore, @unchecked Sendable {
  struct Counts: Equatable {
    var reads = 0
    var saves = 0
    var removes = 0
    var removeAlls = 0
  }

  let inner: InMemoryTokenStore
  /// Signalled after every write that reached ``inner``, so that a test can await what the store
  /// holds (a save that outlives its flight's callers emits no event when it lands).
  let changes = ChangeSignal()
  let counts = LockedState(Counts())
  private struct Gate {
    var held = false
    var waiters: [CheckedContinuation<Void, Never>] = []
    /// Tests waiting (in ``waitForHeldSaves(_:)``) until this many saves are held.
    var watchers: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
  }
  private let gate = LockedState(Gate())
  let failSaves: Bool
  let failReads: Bool

  init(_ models: [AccountKey: AuthModel] = [:], failSaves: Bool = false, failReads: Bool = false) {
    inner = InMemoryTokenStore(models)
    self.failSaves = failSaves
    self.failReads = failReads
  }

  struct Failure: Error {}

  /// Makes later saves wait until ``releaseSaves()``.
  func holdSaves() { gate.withLock { $0.held = true } }

  /// Lets held saves proceed.
  func releaseSaves() {
    let waiters = gate.withLock { state -> [CheckedContinuation<Void, Never>] in
      state.held = false
      defer { state.waiters.removeAll() }
      return state.waiters
    }
    for waiter in waiters { waiter.resume() }
  }

  var heldSaves: Int { gate.withLock { $0.waiters.count } }

  /// Waits (without polling) until at least `count` saves are held: the store's own signal, as
  /// the coordinator emits no event when a save starts.
  func waitForHeldSaves(_ count: Int) async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let ready = gate.withLock { state -> Bool in
        if state.waiters.count >= count { return true }
        state.watchers.append((count, continuation))
        return false
      }
      if ready { continuation.resume() }
    }
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    counts.withLock { $0.reads += 1 }
    if failReads { throw Failure() }
    return await inner.model(for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    counts.withLock { $0.saves += 1 }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let (wait, ready) = gate.withLock { state -> (Bool, [CheckedContinuation<Void, Never>]) in
        guard state.held else { return (false, []) }
        state.waiters.append(continuation)
        let count = state.waiters.count
        var ready: [CheckedContinuation<Void, Never>] = []
        state.watchers.removeAll { watcher in
          guard watcher.count <= count else { return false }
          ready.append(watcher.continuation)
          return true
        }
        return (true, ready)
      }
      for watcher in ready { watcher.resume() }
      if !wait { continuation.resume() }
    }
    if failSaves { throw Failure() }
    await inner.save(model, for: key)
    changes.changed()
  }

  func removeModel(for key: AccountKey) async throws {
    counts.withLock { $0.removes += 1 }
    await inner.removeModel(for: key)
    changes.changed()
  }

  /// Makes later removals of an account's models throw (``failRemoves(_:)``).
  private let removalsFail = LockedState(false)
  func failRemoves(_ fail: Bool) { removalsFail.withLock { $0 = fail } }

  func removeModels(forAccount account: String) async throws {
    counts.withLock { $0.removes += 1 }
    if removalsFail.withLock({ $0 }) { throw Failure() }
    await inner.removeModels(forAccount: account)
    changes.changed()
  }

  func removeAll() async throws {
    counts.withLock { $0.removeAlls += 1 }
    await inner.removeAll()
    changes.changed()
  }
}

extension AuthEvent {
  /// Whether this is a `.flightCancelled` for `reason`.
  func isFlightCancelled(_ reason: CancelReason) -> Bool {
    if case .flightCancelled(_, _, reason) = self { true } else { false }
  }

  /// Whether this is a `.lateResultDiscarded`.
  var isLateResultDiscarded: Bool {
    if case .lateResultDiscarded = self { true } else { false }
  }

  /// Whether this is a `.flightSucceeded`.
  var isFlightSucceeded: Bool {
    if case .flightSucceeded = self { true } else { false }
  }
}

extension AuthCoordinatorError.Code {
  /// An authorizer's own reason, defined outside the core as a module on top of it defines its
  /// codes (the Alipay bridge defines this one, with the same raw value). The core passes an
  /// ``AuthCoordinatorError`` from the authorizer through with its code untouched.
  static let userCancelled = Self(rawValue: "user_cancelled")
}
