import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

@testable import AuthCoordinator

/// A thread's replica of a model (`HitReplicas`) against everything that changes the key: each
/// test makes the replica on a thread of its own, changes the key from a task, and asks again
/// on the same thread, where the replica would be served if it were still considered current.
@Suite(.timeLimit(.minutes(2))) struct HitReplicaInvalidationTests {
  /// 40 bytes: a token with a buffer of its own.
  static func token(_ name: String) -> String { name + String(repeating: "x", count: 40) }

  /// A harness whose key u1 is cached with token `t1`, and a thread holding a replica of it.
  func cachedWithReplica(
    expiresIn: TimeInterval = 3600,
    configure: (inout AuthCoordinator.Configuration) -> Void = { _ in }
  ) async throws -> (Harness, OneThread) {
    let h = Harness(configure: configure)
    let first = h.request()
    let call = await h.authorizer.nextCall()
    call.succeed(with: makeModel(Self.token("t1"), clock: h.clock, expiresIn: expiresIn))
    _ = try await first.value
    let thread = OneThread()
    let coordinator = h.coordinator
    // Two hits make the replica; the third is served from it.
    let answers = await thread.run { (0..<3).map { _ in coordinator.lookupSummary(u1) } }
    #expect(answers == Array(repeating: "hit " + Self.token("t1"), count: 3))
    #expect(coordinator.replicaHits.total == 1)
    return (h, thread)
  }

  @Test func aLogoutEndsTheReplica() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    await coordinator.accountStatusChanged(.logout(account: u1.account))
    #expect(await thread.run { coordinator.lookupSummary(u1) } == "miss")
    #expect(coordinator.replicaHits.total == 1)
  }

  /// A signed-out user's token does not stay in a thread's table until that thread asks for
  /// the user again: its next hit on any key drops every copy whose stripe changed.
  @Test func aThreadDropsASignedOutUsersCopyAtItsNextHit() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    #expect(await thread.run { HitReplicas.current?.copiesHeld } == 1)
    await coordinator.accountStatusChanged(.logout(account: u1.account))
    let held = await thread.run { () -> Int? in
      _ = coordinator.lookupSummary(u2)  // another user, not in memory: a miss
      return HitReplicas.current?.copiesHeld
    }
    #expect(held == 0)
  }

  @Test func aLogoutOfEveryUserEndsTheReplica() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    await coordinator.accountStatusChanged(.logoutAll)
    #expect(await thread.run { coordinator.lookupSummary(u1) } == "miss")
  }

  @Test func aForcedRefreshEndsTheReplica() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    let forced = h.request(refresh: .force(rejecting: Self.token("t1")))
    let call = await h.authorizer.nextCall()
    // Ordinary requests keep being served the valid cached token while the refresh runs
    // (rule 5), but by the machine: the forced request moved the epoch.
    let during = await thread.run { coordinator.lookupSummary(u1) }
    #expect(during == "hit " + Self.token("t1"))
    #expect(coordinator.replicaHits.total == 1)
    call.succeed(with: makeModel(Self.token("t2"), clock: h.clock, expiresIn: 3600))
    _ = try await forced.value
    let answers = await thread.run { (0..<3).map { _ in coordinator.lookupSummary(u1) } }
    #expect(answers == Array(repeating: "hit " + Self.token("t2"), count: 3))
  }

  @Test func aReplicaPastItsWindowGoesToTheMachine() async throws {
    let (h, thread) = try await cachedWithReplica(expiresIn: 3600)
    let coordinator = h.coordinator
    h.clock.advance(by: .seconds(3600))
    #expect(await thread.run { coordinator.lookupSummary(u1) } == "miss")
    #expect(coordinator.replicaHits.total == 1)
  }

  /// The deadlines of a flight that ended stay in the heap until due; when they fall due they
  /// change nothing, and the replica stays.
  @Test func aDeadlineOfAnEndedFlightKeepsTheReplica() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    #expect(coordinator.stateSizes.deadlines > 0)
    h.clock.advance(by: .seconds(600))
    coordinator.deadlinesDue()
    #expect(coordinator.stateSizes.deadlines == 0)
    #expect(await thread.run { coordinator.lookupSummary(u1) } == "hit " + Self.token("t1"))
    #expect(coordinator.replicaHits.total == 2, "served from the replica")
  }

  /// Replica hits refresh the key's recency only once in 64, so an evicted key may be one a
  /// thread still holds a replica of: the eviction retires it, and the key comes back from the
  /// store.
  @Test func anEvictionEndsTheReplica() async throws {
    let (h, thread) = try await cachedWithReplica { $0.maxIdleKeys = 1 }
    let coordinator = h.coordinator
    for account in ["b", "c"] {
      let key = AccountKey(account: account)
      let task = h.request(key)
      await h.authorizer.nextCall().succeed(
        with: makeModel("t-" + account, mcUid: account, clock: h.clock, expiresIn: 3600))
      _ = try await task.value
    }
    // u1, the least recently used, is evicted at c's admission at the latest (b's flight's end
    // may evict it first, and c's may then evict b too).
    #expect(h.stats.evictions >= 1)
    #expect(await thread.run { coordinator.lookupSummary(u1) } == "miss", "u1 was evicted")
    #expect(coordinator.replicaHits.total == 1)
    #expect(try await coordinator.authModel(for: u1).accessToken == Self.token("t1"))
    #expect(h.authorizer.callCount == 3, "u1 came back from the store")
  }

  @Test func statisticsCountEveryHitOnce() async throws {
    let (h, thread) = try await cachedWithReplica()
    let coordinator = h.coordinator
    let before = h.stats.cacheHits
    let answers = await thread.run { (0..<200).map { _ in coordinator.lookupSummary(u1) } }
    #expect(answers.allSatisfy { $0 == "hit " + Self.token("t1") })
    #expect(h.stats.cacheHits == before + 200)
    #expect(coordinator.replicaHits.total > 100, "most of them from the replica")
  }

  /// Threads hitting the key without pause while a logout runs: once the logout has returned,
  /// none of them is served the old token again, from a replica or otherwise; and every hit
  /// is counted once. (Here a thread's first miss after the logout moves the epoch too, so this
  /// fails only when both the logout's and the miss's advance are gone, 985 late hits per
  /// thread when checked; `aLogoutEndsTheReplica` checks the logout's alone.)
  @Test func threadsHittingThroughALogoutNeverServeItsTokenAfter() async throws {
    let (h, _) = try await cachedWithReplica()
    let coordinator = h.coordinator
    let loggedOut = DoneSignal()
    let threads = (0..<4).map { _ in OneThread() }
    let before = h.stats.cacheHits
    let runs = threads.map { thread in
      Task {
        await thread.run { () -> (hits: Int, lateHits: Int) in
          var hits = 0
          var lateHits = 0
          // Until the logout has returned, and then 1,000 requests more.
          var after = 0
          while after < 1_000 {
            let done = loggedOut.isDone
            if case .hit = coordinator.lookupAnswer(u1) {
              hits += 1
              if done { lateHits += 1 }
            }
            if done { after += 1 }
          }
          return (hits, lateHits)
        }
      }
    }
    // Let every thread serve from its replica first.
    try await waitUntil { coordinator.replicaHits.total > 4_000 }
    await coordinator.accountStatusChanged(.logout(account: u1.account))
    loggedOut.set()
    var hits = 0
    for run in runs {
      let result = await run.value
      #expect(result.lateHits == 0)
      hits += result.hits
    }
    #expect(h.stats.cacheHits == before + hits)
  }
}

/// Polls `condition` on the concurrency pool, yielding between checks, for at most 10 s.
private func waitUntil(_ condition: () -> Bool) async throws {
  let start = ContinuousClock.now
  while !condition() {
    guard ContinuousClock.now - start < .seconds(10) else {
      Issue.record("condition not met within 10 s")
      return
    }
    await Task.yield()
  }
}

/// A flag set once, read from any thread.
private final class DoneSignal: Sendable {
  private let state = LockedState(false)
  func set() { state.withLock { $0 = true } }
  var isDone: Bool { state.withLock { $0 } }
}

extension AuthCoordinator {
  fileprivate func lookupAnswer(_ key: AccountKey) -> Lookup {
    let answer = lookup(key)
    if case .joined(let queue, let ticket) = answer { queue.leave(ticket, .cancelled) }
    return answer
  }

  /// What ``lookup(_:)`` answered, in words: `hit` and the token, `joined` or `miss`.
  fileprivate func lookupSummary(_ key: AccountKey) -> String {
    switch lookup(key) {
    case .hit(let model): return "hit " + model.accessToken
    case .joined(let queue, let ticket):
      queue.leave(ticket, .cancelled)
      return "joined"
    case .miss: return "miss"
    // Never from a lookup (admission alone answers it): the expected summaries fail on it.
    case .retry: return "retry"
    }
  }
}

/// Runs closures one at a time on one thread of its own (not the concurrency pool's), so that
/// a test can make a thread's replica and then ask on the same thread.
final class OneThread: @unchecked Sendable {
  private let jobs = LockedState<[@Sendable () -> Void]>([])
  private let ready = DispatchSemaphore(value: 0)

  init() {
    let jobs = self.jobs
    let ready = self.ready
    let thread = Thread {
      while true {
        ready.wait()
        guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { return }
        job()
      }
    }
    thread.start()
  }

  deinit {
    // An empty list when woken: the thread returns.
    ready.signal()
  }

  func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
      jobs.withLock { $0.append { continuation.resume(returning: body()) } }
      ready.signal()
    }
  }
}
