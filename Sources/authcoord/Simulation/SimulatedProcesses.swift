import AuthCoordinator
import Foundation

/// `--processes N`: SIMULATED processes. They are N coordinators in this one OS process, each
/// with its own memory (its own cache, flights and statistics), sharing one
/// ``InMemoryTokenStore`` and one ``InMemoryAuthorizationLease``, the way an app and its
/// extensions share a file store and a file lease in an app group. The first is the app, which
/// may send the user to Alipay; the others are extensions (widgets) whose coordinators have
/// `allowsInteraction = false`: they adopt what the app stored.
///
/// The store and the lease each process sees are thin wrappers around the shared ones that only
/// log to the timeline who stored a model and who holds a key's lease; the coordinators are the
/// real ones.
struct SimulatedProcess: Sendable {
  /// `app`, `widget-2`, `widget-3`, ...
  let name: String
  /// Whether the process may send the user to Alipay (only the app).
  let allowsInteraction: Bool

  /// The processes of a run: the app, then `count - 1` widgets.
  static func all(count: Int) -> [SimulatedProcess] {
    (0..<count).map { index in
      index == 0
        ? SimulatedProcess(name: "app", allowsInteraction: true)
        : SimulatedProcess(name: "widget-\(index + 1)", allowsInteraction: false)
    }
  }
}

/// What the simulated processes share besides the store and the lease: which process stored
/// each key's model last, and which process each lease owner is (for the timeline only).
final class SharedLedger: @unchecked Sendable {
  private let lock = NSLock()
  private var writers: [AccountKey: String] = [:]
  private var owners: [String: String] = [:]
  private var reportedWaits: Set<String> = []

  func stored(_ key: AccountKey, by process: String) {
    lock.withLock { writers[key] = process }
  }

  func writer(of key: AccountKey) -> String? { lock.withLock { writers[key] } }

  func register(owner: String, as process: String) {
    lock.withLock { owners[owner] = process }
  }

  func process(ofOwner owner: String) -> String? { lock.withLock { owners[owner] } }

  /// Whether a wait of `process` for `key`'s lease, held until `until`, is new (a waiter that
  /// tries again after an unrelated change is not logged twice).
  func firstWait(of process: String, for key: AccountKey, holder: String, until: Date) -> Bool {
    let mark = "\(process)|\(key.mcUid)|\(key.mode)|\(holder)|\(until.timeIntervalSince1970)"
    return lock.withLock { reportedWaits.insert(mark).inserted }
  }
}

/// One simulated process's view of the shared ``InMemoryTokenStore``: logs saves.
final class ProcessTokenStore: TokenStore {
  let process: SimulatedProcess
  let shared: InMemoryTokenStore
  let ledger: SharedLedger
  let timeline: Timeline

  init(
    process: SimulatedProcess, shared: InMemoryTokenStore, ledger: SharedLedger, timeline: Timeline
  ) {
    self.process = process
    self.shared = shared
    self.ledger = ledger
    self.timeline = timeline
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    await shared.model(for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await shared.save(model, for: key)
    ledger.stored(key, by: process.name)
    timeline.log("\(process.name) stored \(key.mcUid)'s model in the shared store")
  }

  func removeModel(for key: AccountKey) async throws {
    await shared.removeModel(for: key)
  }

  func removeModels(forAccount account: String) async throws {
    await shared.removeModels(forAccount: account)
  }

  func removeAll() async throws {
    await shared.removeAll()
  }
}

/// Hands the shared lease's announcements to the simulated processes in process order (the
/// app's first), so that the timeline is the same on every run: the in-memory lease announces
/// to its subscribers in the order of a `Dictionary`, which differs from run to run.
///
/// With one user that makes the timeline the same on every run. With several users, the flights
/// of one coordinator that wait for the lease are woken in an order the coordinator keeps in a
/// `Dictionary` too: lines stamped with the same instant may then come in another order from run
/// to run; the outcome and the summary do not change.
final class OrderedLeaseAnnouncements: @unchecked Sendable {
  private let lock = NSLock()
  private var subscribers: [AsyncStream<LeaseChange>.Continuation] = []
  private var forwarder: Task<Void, Never>?

  init(_ lease: InMemoryAuthorizationLease) {
    // Subscribed now, so that no change is missed.
    let changes = lease.changes()
    forwarder = Task { [weak self] in
      for await change in changes { self?.announce(change) }
    }
  }

  /// A new subscriber, announced to after the earlier ones.
  func subscribe() -> AsyncStream<LeaseChange> {
    let (stream, continuation) = AsyncStream<LeaseChange>.makeStream()
    lock.withLock { subscribers.append(continuation) }
    return stream
  }

  private func announce(_ change: LeaseChange) {
    for subscriber in lock.withLock({ subscribers }) { subscriber.yield(change) }
  }

  /// Ends the forwarding and every subscription (the end of the run).
  func stop() {
    forwarder?.cancel()
    for subscriber in lock.withLock({ subscribers }) { subscriber.finish() }
  }
}

/// One simulated process's view of the shared ``InMemoryAuthorizationLease``: logs who takes,
/// waits for and releases a key's lease.
final class ProcessLease: AuthorizationLease {
  let process: SimulatedProcess
  let shared: InMemoryAuthorizationLease
  let announcements: OrderedLeaseAnnouncements
  let ledger: SharedLedger
  let timeline: Timeline

  init(
    process: SimulatedProcess, shared: InMemoryAuthorizationLease,
    announcements: OrderedLeaseAnnouncements, ledger: SharedLedger, timeline: Timeline
  ) {
    self.process = process
    self.shared = shared
    self.announcements = announcements
    self.ledger = ledger
    self.timeline = timeline
  }

  func acquire(_ key: AccountKey, owner: String, timeToLive: Duration) async throws -> LeaseAttempt
  {
    ledger.register(owner: owner, as: process.name)
    let attempt = await shared.acquire(key, owner: owner, timeToLive: timeToLive)
    switch attempt {
    case .acquired:
      timeline.log("\(process.name) took \(key.mcUid)'s lease: it authorizes for every process")
    case .heldElsewhere(let holder, let until):
      let holderName =
        ledger.process(ofOwner: holder).map { $0 == "app" ? "the app" : $0 }
        ?? "another process"
      if ledger.firstWait(of: process.name, for: key, holder: holder, until: until) {
        timeline.log(
          "\(process.name) found \(key.mcUid)'s lease held by \(holderName): waits for its result")
      }
    case .backingOff(_, _, let code):
      timeline.log(
        "\(process.name) found \(key.mcUid)'s lease backing off after a failure (\(code)):"
          + " it does not authorize")
    }
    return attempt
  }

  func renew(_ grant: LeaseGrant, timeToLive: Duration) async throws -> LeaseGrant? {
    await shared.renew(grant, timeToLive: timeToLive)
  }

  func release(_ grant: LeaseGrant) async throws {
    timeline.log("\(process.name) released \(grant.key.mcUid)'s lease")
    await shared.release(grant)
  }

  func release(_ grant: LeaseGrant, backingOff backOff: LeaseBackOff) async throws {
    timeline.log(
      "\(process.name) released \(grant.key.mcUid)'s lease, backing off every process"
        + " (\(backOff.code))")
    await shared.release(grant, backingOff: backOff)
  }

  func signOut(account: String, by owner: String) async throws {
    await shared.signOut(account: account, by: owner)
  }

  func signOutAll(by owner: String) async throws {
    timeline.log("\(process.name) signs everyone out of every process (through the lease)")
    await shared.signOutAll(by: owner)
  }

  func revokeGrants(ofAccount account: String) async throws {
    await shared.revokeGrants(ofAccount: account)
  }

  func revokeAllGrants() async throws { await shared.revokeAllGrants() }

  func revokeGrantsReportingFence(ofAccount account: String) async throws -> UInt64? {
    await shared.revokeGrantsReportingFence(ofAccount: account)
  }

  func revokeAllGrantsReportingFence() async throws -> UInt64? {
    await shared.revokeAllGrantsReportingFence()
  }

  func isCurrent(_ grant: LeaseGrant) async throws -> Bool {
    await shared.isCurrent(grant)
  }

  func changes() -> AsyncStream<LeaseChange> { announcements.subscribe() }
}
