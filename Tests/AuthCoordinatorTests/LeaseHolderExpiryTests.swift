import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// A holder expiry no sane process writes (1e300 seconds ahead) never traps the waiting
/// coordinator: from a lease file it is a corrupt record (replaced, the key taken at once); from
/// any other lease the wait for it is clamped instead of converted unchecked to a `Duration`.
@Suite(.timeLimit(.minutes(1))) struct LeaseHolderExpiryTests {
  @Test func aLeaseFileWithAnAbsurdHolderExpiryIsReplacedNotWaitedFor() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("absurd-lease-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    try FileManager.default.createDirectory(
      at: directory, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    let url = directory.appendingPathComponent("tokens.store")
    let record =
      #"{"floor":0,"format":"authcoordinator.lease","generation":0,"holders":[{"expiresAt":1e300,"#
      + #""fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"elsewhere"}],"#
      + #""nextFence":2,"userSignedOut":[],"version":1}"#
    try Data(record.utf8).write(to: URL(fileURLWithPath: url.path + ".lease"))
    let issues = LockedIssues()
    let store = FileTokenStore(url: url)
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(
      store: store, lease: FileAuthorizationLease(nextTo: store, onIssue: issues.append),
      authorizer: authorizer)

    let caller = Task { try await coordinator.authModel(for: u1) }
    let call = await authorizer.nextCall()
    let model = makeModel("fresh")
    call.succeed(with: model)
    #expect(try await caller.value == model)
    // Reported by the read that replaced it (and by the coordinator's watcher, if it read first).
    #expect(!issues.codes.isEmpty && issues.codes.allSatisfy { $0 == .corruptFile })
  }

  @Test func aHolderExpiryFarBeyondAnyDurationIsWaitedForWithoutTrapping() async throws {
    // The lease's wall clock runs far ahead of the coordinator's: the holder it reports
    // expires about 1e300 seconds after the coordinator's now (and is not expired on the
    // lease's clock, which reads 1e299 when the flight asks).
    let armed = LockedState(false)
    let (reads, reader) = AsyncStream<Void>.makeStream()
    let lease = InMemoryAuthorizationLease(now: {
      guard armed.withLock({ $0 }) else { return Date(timeIntervalSinceReferenceDate: 1e300) }
      reader.yield()
      return Date(timeIntervalSinceReferenceDate: 1e299)
    })
    let attempt = await lease.acquire(u1, owner: "elsewhere", timeToLive: .seconds(60))
    guard case .acquired(let held) = attempt else {
      Issue.record("the holder could not take the key: \(attempt)")
      return
    }
    armed.withLock { $0 = true }
    let authorizer = ScriptedAuthorizer()
    let coordinator = AuthCoordinator(
      store: InMemoryTokenStore(), lease: lease, authorizer: authorizer)

    let caller = Task { try await coordinator.authModel(for: u1) }
    // The flight's attempt read the lease's clock: it is told the key is held until 1e300
    // seconds from now, and waits for the holder (its release is announced after the attempt,
    // so it wakes the wait whenever that begins).
    var iterator = reads.makeAsyncIterator()
    _ = await iterator.next()
    await lease.release(held)
    let call = await authorizer.nextCall()
    let model = makeModel("fresh")
    call.succeed(with: model)
    #expect(try await caller.value == model)
  }
}

/// The issues a lease reports, by code.
private final class LockedIssues: Sendable {
  private let issues = LockedState<[TokenStoreError]>([])
  var codes: [TokenStoreError.Code] { issues.withLock { $0.map(\.code) } }
  var append: @Sendable (TokenStoreError) -> Void {
    { [issues] issue in issues.withLock { $0.append(issue) } }
  }
}
