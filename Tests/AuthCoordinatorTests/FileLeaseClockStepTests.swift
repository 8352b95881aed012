import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Expiries on one host never depend on the wall clock (the faults issue). Two coordinators,
/// each with its own `FileTokenStore` and `FileAuthorizationLease` on the same files (two
/// processes), on a manual clock: the coordinators' `Configuration.now` and the leases' wall
/// clock are the manual clock's date plus a step the test sets (±1 h mid-hold), while the
/// leases' boot clock follows the manual clock only. Before, lease expiries were wall-clock
/// dates: a forward step let the waiting process take a live holder's lease over and authorize a
/// second time, and a backward step kept a dead holder's lease for an hour more.
@Suite(.timeLimit(.minutes(5))) struct FileLeaseClockStepTests {
  @Test(arguments: [3600.0, -3600.0])
  func aWallClockStepMidHoldCausesNoTakeoverWhileTheHolderRenews(_ step: TimeInterval)
    async throws
  {
    let rig = try Rig()
    defer { rig.remove() }
    let issuer = TestTokenIssuer()
    let stored = issuer.login(mcUid: "u1", at: rig.wall().addingTimeInterval(-4 * 3600))
    try await rig.store(stored)
    let a = rig.process("A")
    let b = rig.process("B")

    let first = rig.callers.task { try await a.coordinator.authModel(for: u1) }
    let call = await rig.authorizer.nextCall()
    rig.step(by: step)
    let second = rig.callers.task { try await b.coordinator.authModel(for: u1) }
    let attempt = try await b.lease.attempt(1)
    guard case .heldElsewhere(let owner, let until) = attempt else {
      Issue.record("B took the live lease over after a step of \(step) s: \(attempt)")
      return
    }
    guard case .acquired(let held)? = a.lease.attempts.first else {
      Issue.record("A holds no lease: \(a.lease.attempts)")
      return
    }
    #expect(owner == held.owner)
    // The time A's grant has left (3 s), on B's stepped wall clock.
    #expect(abs(until.timeIntervalSince(rig.wall()) - 3) < 0.01)

    // Four times the time to live: A renews every second; B, woken at each expiry it was told,
    // finds the lease renewed every time.
    for round in 1...12 {
      // Both flights' deadlines, A's renewal and B's wait for the holder are asleep.
      await rig.clock.waitForSleepers(4)
      rig.clock.advance(by: .seconds(1))
      try await a.lease.renewed(round)
    }
    #expect(b.lease.attempts.allSatisfy { $0.isHeldElsewhere }, "\(b.lease.attempts)")
    #expect(rig.authorizer.callCount == 1, "the renewed lease is not taken over")
    let rotated = try issuer.refresh(
      call.request.replacing?.refreshToken, mcUid: "u1", at: rig.wall())
    call.succeed(with: rotated)
    #expect(try await first.value == rotated)
    #expect(try await second.value == rotated)
    #expect(rig.authorizer.callCount == 1)
    #expect(issuer.reuses == 0)
  }

  @Test(arguments: [3600.0, -3600.0])
  func aDeadHoldersLeaseIsTakenOverOnTheBootClockWhateverTheWallClockDid(_ step: TimeInterval)
    async throws
  {
    let rig = try Rig()
    defer { rig.remove() }
    // A process that took the lease (3 s) and died.
    let dead = rig.lease()
    let attempt = try await dead.acquire(u1, owner: "dead-process", timeToLive: .seconds(3))
    guard case .acquired = attempt else {
      Issue.record("the dead process could not take the lease: \(attempt)")
      return
    }
    rig.clock.advance(by: .seconds(2))
    rig.step(by: step)
    let b = rig.process("B")
    let caller = rig.callers.task { try await b.coordinator.authModel(for: u1) }
    let first = try await b.lease.attempt(1)
    guard case .heldElsewhere(_, let until) = first else {
      Issue.record("taken over 1 s early after a step of \(step) s: \(first)")
      return
    }
    // One second left, on B's stepped wall clock (else B would wait for as long as it says).
    guard abs(until.timeIntervalSince(rig.wall()) - 1) < 0.01 else {
      Issue.record(
        "told to wait \(until.timeIntervalSince(rig.wall())) s after a step of \(step) s")
      return
    }
    // B's deadline and its wait for the holder are asleep.
    await rig.clock.waitForSleepers(2)
    rig.clock.advance(by: .milliseconds(900))
    #expect(rig.authorizer.callCount == 0, "never while the holder's lease is live")
    rig.clock.advance(by: .milliseconds(200))
    let call = await rig.authorizer.nextCall()
    #expect(call.request.reason == .missing)
    let model = AuthModel(
      uid: "2088000000000001", accessToken: "taken-over", mcUid: "u1",
      expiresAt: rig.wall().addingTimeInterval(3600))
    call.succeed(with: model)
    #expect(try await caller.value == model)
    #expect(b.lease.attempts.count == 2)
  }

  /// Files, clocks and coordinators of the processes.
  final class Rig: Sendable {
    let clock = ManualClock()
    let directory: URL
    let authorizer = ScriptedAuthorizer()
    let callers = CallerTracker()
    private let offset = LockedState<TimeInterval>(0)

    init() throws {
      directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("lease-clock-step-\(UUID().uuidString)")
      try FileManager.default.createDirectory(
        at: directory, withIntermediateDirectories: false,
        attributes: [.posixPermissions: 0o700])
    }

    var url: URL { directory.appendingPathComponent("tokens.store") }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// The stepped wall clock: what `Configuration.now` and the leases' wall clock read.
    func wall() -> Date { clock.date.addingTimeInterval(offset.withLock { $0 }) }

    /// Steps the wall clock (not the boot clock) by `seconds`.
    func step(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }

    func store(_ model: AuthModel) async throws {
      try await FileTokenStore(url: url).save(model, for: u1)
    }

    /// The host clock every process of the rig reads: this wall clock, and a boot clock that
    /// is the manual clock's offset.
    var hostClock: HostClock {
      let clock = clock
      let offset = offset
      return HostClock(
        wall: { clock.date.addingTimeInterval(offset.withLock { $0 }) },
        boot: {
          let (seconds, attoseconds) = clock.now.offset.components
          return BootInstant(
            boot: "boot-of-the-test",
            nanoseconds: 1_000_000_000_000 + UInt64(seconds) * 1_000_000_000
              + UInt64(attoseconds / 1_000_000_000))
        })
    }

    func lease() -> FileAuthorizationLease {
      FileAuthorizationLease(url: URL(fileURLWithPath: url.path + ".lease"), clock: hostClock)
    }

    /// A process: its own store and lease objects on the rig's files, on the rig's clocks.
    func process(_ name: String) -> (coordinator: AuthCoordinator, lease: ObservedLease) {
      let lease = ObservedLease(lease())
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
      configuration.clock = clock
      configuration.now = { [self] in wall() }
      configuration.leaseTimeToLive = .seconds(3)
      let coordinator = AuthCoordinator(
        store: FileTokenStore(url: url), lease: lease, authorizer: authorizer,
        configuration: configuration)
      return (coordinator, lease)
    }
  }
}

/// A lease that records every attempt and counts renewals, and signals each.
final class ObservedLease: AuthorizationLease {
  let inner: FileAuthorizationLease
  private let state = LockedState<(attempts: [LeaseAttempt], renewals: Int)>(([], 0))
  private let signal = ChangeSignal()

  init(_ inner: FileAuthorizationLease) { self.inner = inner }

  var attempts: [LeaseAttempt] { state.withLock { $0.attempts } }

  /// The `count`th attempt, once made.
  func attempt(_ count: Int) async throws -> LeaseAttempt {
    try await signal.waitUntil { [state] in state.withLock { $0.attempts.count >= count } }
    return state.withLock { $0.attempts[count - 1] }
  }

  /// Returns once `count` renewals succeeded.
  func renewed(_ count: Int) async throws {
    try await signal.waitUntil { [state] in state.withLock { $0.renewals >= count } }
  }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async throws -> LeaseAttempt
  {
    let attempt = try await inner.acquire(key, owner: owner, timeToLive: timeToLive)
    state.withLock { $0.attempts.append(attempt) }
    signal.changed()
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    let renewed = try await inner.renew(grant, timeToLive: timeToLive)
    if renewed != nil { state.withLock { $0.renewals += 1 } }
    signal.changed()
    return renewed
  }

  func release(_ grant: LeaseGrant) async throws { try await inner.release(grant) }
  func revokeGrants(ofAccount account: String) async throws {
    try await inner.revokeGrants(ofAccount: account)
  }
  func revokeAllGrants() async throws { try await inner.revokeAllGrants() }
  func signOut(account: String, by owner: String) async throws {
    try await inner.signOut(account: account, by: owner)
  }
  func signOutAll(by owner: String) async throws { try await inner.signOutAll(by: owner) }
  func isCurrent(_ grant: LeaseGrant) async throws -> Bool { try await inner.isCurrent(grant) }
  func changes() -> AsyncStream<LeaseChange> { inner.changes() }
}

extension LeaseAttempt {
  fileprivate var isHeldElsewhere: Bool {
    if case .heldElsewhere = self { true } else { false }
  }
}
