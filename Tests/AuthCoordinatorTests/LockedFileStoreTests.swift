import AuthCoordinator
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The outside review's reproduction, end to end on the real file store and the real clock:
/// another holder keeps the store's lock file locked. Before the fix the request waited as long
/// as the lock was held, and so did a logout.
///
/// The store's own lock wait is set to a minute, so what frees the callers here is the
/// coordinator's store deadline (`authorizationTimeout` 5 s caps it). The bounds asserted are
/// far above it (30 s), so a loaded machine cannot fail the test; a hang still does.
@Suite(.timeLimit(.minutes(2))) struct LockedFileStoreTests {
  @Test func callersAndLogoutAreBoundedWhileAnotherHolderHasTheLock() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appending(path: "locked-store-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appending(path: "tokens.store")
    let store = FileTokenStore(url: url, lockTimeout: .seconds(60))
    try await store.save(makeModel("old"), for: u1)

    let issued = LockedCounter()
    let coordinator = AuthCoordinator(
      store: store,
      authorizer: ClosureAuthorizer { request in
        issued.increment()
        return makeModel("new-\(issued.value)", mcUid: request.key.account)
      },
      configuration: .init(authorizationTimeout: .seconds(5)))
    #expect(try await coordinator.authModel(for: u1).accessToken == "old", "read before the lock")

    // Another process's lock on `<name>.lock`, through an open file description of its own.
    let holder = open(url.path(percentEncoded: false) + ".lock", O_RDWR | O_CREAT, 0o600)
    #expect(holder >= 0)
    #expect(flock(holder, LOCK_EX | LOCK_NB) == 0)
    var released = false
    defer { if !released { close(holder) } }
    let clock = ContinuousClock()

    // A forced refresh: the save of its model cannot take the lock.
    let start = clock.now
    let model = try await coordinator.authModel(for: u1, refresh: .force(rejecting: "old"))
    #expect(model.accessToken == "new-1", "the model is served though its save is stuck")
    #expect(clock.now - start < .seconds(30))
    #expect(coordinator.statistics.storeFailures >= 1, "the stuck save is reported")

    let logoutStart = clock.now
    await coordinator.accountStatusChanged(.logout(account: "u1"))
    #expect(clock.now - logoutStart < .seconds(30), "logout returns while the lock is held")

    close(holder)
    released = true
    // The old session is over, whether its removal ran after the lock came back or failed.
    // The stuck save and the logout's removal run first, each with an fsync: on a busy machine
    // they once took longer than the 5 s store deadline of the next request's re-read (CI,
    // 2026-12-05). A re-read that timed out authorized nothing, so the request is simply
    // asked again, as a caller would; what it must never get is the old session.
    var after: AuthModel?
    for _ in 0..<6 where after == nil {
      do {
        after = try await coordinator.authModel(for: u1)
      } catch let error as AuthCoordinatorError where error.code == .storeFailed {
        continue
      }
    }
    #expect(after?.accessToken == "new-2", "nothing of the signed-out session is served")
  }
}

/// A counter the authorizer closure can share.
private final class LockedCounter: @unchecked Sendable {
  private let lock = NSLock()
  private var count = 0
  var value: Int { lock.withLock { count } }
  func increment() { lock.withLock { count += 1 } }
}
