import AuthCoordinator
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The outside review's reproduction, end to end on the real file store and the real clock:
/// another holder keeps the store's lock file locked, and the coordinator is configured with
/// `authorizationTimeout = 1 s`. Before the fix the request was still waiting after 4 s and a
/// logout waited until the lock was released.
///
/// The bounds asserted here are generous (4 s for a 1 s deadline); nothing waits for a timer to
/// let work happen.
@Suite(.timeLimit(.minutes(1))) struct LockedFileStoreTests {
  @Test func callersAndLogoutAreBoundedWhileAnotherHolderHasTheLock() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appending(path: "locked-store-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appending(path: "tokens.store")
    let store = FileTokenStore(url: url)
    try await store.save(makeModel("old"), for: u1)

    // Another process's lock on `<name>.lock`, through an open file description of its own.
    let holder = open(url.path(percentEncoded: false) + ".lock", O_RDWR | O_CREAT, 0o600)
    #expect(holder >= 0)
    #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)
    var released = false
    defer { if !released { close(holder) } }

    let issued = LockedCounter()
    let coordinator = AuthCoordinator(
      store: store,
      authorizer: ClosureAuthorizer { request in
        issued.increment()
        return makeModel("new-\(issued.value)", mcUid: request.key.mcUid)
      },
      configuration: .init(authorizationTimeout: .seconds(1)))
    let clock = ContinuousClock()

    // A forced refresh: the save of its model cannot take the lock.
    let start = clock.now
    let model = try await coordinator.authModel(for: u1, refresh: .force(rejecting: "old"))
    #expect(model.accessToken == "new-1", "the model is served though its save is stuck")
    #expect(clock.now - start < .seconds(4))
    #expect(coordinator.statistics.storeFailures >= 1)

    let logoutStart = clock.now
    await coordinator.accountStatusChanged(.logout(mcUid: "u1"))
    #expect(clock.now - logoutStart < .seconds(4), "logout returns while the lock is held")

    close(holder)
    released = true
    // The old session is over, whether its removal ran after the lock came back or failed.
    let after = try await coordinator.authModel(for: u1)
    #expect(after.accessToken == "new-2", "nothing of the signed-out session is served")
  }
}

/// A counter the authorizer closure can share.
private final class LockedCounter: @unchecked Sendable {
  private let lock = NSLock()
  private var count = 0
  var value: Int { lock.withLock { count } }
  func increment() { lock.withLock { count += 1 } }
}
