import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// The demo's clock: virtual time that moves only when the simulated world is idle, so the
/// outcome and the printed timeline do not depend on how fast (or how loaded) the machine is.
///
/// Every sleeper (the simulated user thinking in Alipay, the simulated server, the coordinator's
/// own deadline tasks, the provider's grace timer) waits in ``VirtualWorld``, in deadline order.
struct VirtualClock: Clock {
  struct Instant: InstantProtocol {
    var offset: Duration
    func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
    func duration(to other: Instant) -> Duration { other.offset - offset }
    static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
  }

  let world: VirtualWorld

  var now: Instant { Instant(offset: world.now) }
  var minimumResolution: Duration { .zero }

  func sleep(until deadline: Instant, tolerance: Duration?) async throws {
    try await world.sleep(until: deadline.offset)
  }
}

/// Runs the simulated world on one thread and moves its virtual clock.
///
/// How idleness is known, rather than guessed: while ``run(speedup:_:)`` runs, every job the
/// Swift runtime would hand to the global concurrent executor (every task step, every actor turn,
/// every resumed continuation: the callers, the simulated Alipay app and server, and the real
/// coordinator, router and provider) is queued here instead, through the runtime's
/// `swift_task_enqueueGlobal_hook`, and run one at a time by a single driver thread. When that
/// queue is empty, nothing in the world can run until a sleeper wakes: the driver then moves the
/// clock to the earliest sleeper's deadline and wakes every sleeper due then, in the order they
/// went to sleep. Explicit bookkeeping by the simulated parties alone could not see the
/// coordinator's internal hand-offs (flight tasks, resumed continuations, store writes); the
/// executor sees all of them.
///
/// `speedup` only paces the output for a human: before each move of `d` simulated seconds the
/// driver waits `d / speedup` real seconds (0: not at all). It changes no outcome and no
/// timestamp.
///
/// By default the driver runs the queued jobs in the order they were queued. With a `shuffle`
/// seed (the fleet simulation's), it picks the next one among all runnable jobs by a generator
/// that seed starts: every interleaving the runtime could choose is a seed away, and the same
/// seed picks the same one on every run (the runtime promises no order among jobs of the global
/// concurrent executor, so every pick is one a real run could make).
final class VirtualWorld: @unchecked Sendable, SerialExecutor {
  private struct Sleeper {
    let deadline: Duration
    let id: UInt64
    let continuation: CheckedContinuation<Void, any Error>
  }

  /// The one world of this process (the hook is process-wide).
  static let shared = VirtualWorld()

  private let condition = NSCondition()
  // Guarded by `condition`.
  private var jobs: [UnownedJob] = []
  private var head = 0
  private var sleepers: [Sleeper] = []
  private var cancelled: Set<UInt64> = []
  private var settling: [CheckedContinuation<Void, Never>] = []
  private var nextID: UInt64 = 0
  private var offset: Duration = .zero
  private var speedup = 1_000
  private var advancing = false
  private var started = false
  /// The job picker's state (SplitMix64), when the run shuffles.
  private var shuffle: UInt64?
  /// Called on the driver thread when a shuffled run is stuck: no job can run, no sleeper is
  /// left, and the run has not returned. In a closed world (the fleet simulation's) nothing
  /// outside can wake it: every task waits for something that will never happen.
  nonisolated(unsafe) var onStuck: (@Sendable (Duration) -> Void)?

  private init() {}

  /// The virtual time elapsed since the world started.
  var now: Duration { condition.withLock { offset } }

  /// Why the world cannot run.
  struct Unavailable: Error, CustomStringConvertible {
    var description: String {
      "this Swift runtime has no swift_task_enqueueGlobal_hook; the deterministic simulation "
        + "needs it to know when the simulated world is idle"
    }
  }

  /// Runs `body` in the virtual world and returns its result. Once `body` returns, the clock
  /// stops: sleepers still pending (deadlines of flights nobody waits for) never wake.
  func run<T: Sendable>(
    speedup: Int, shuffle: UInt64? = nil, _ body: @escaping @Sendable (VirtualClock) async -> T
  ) async throws(Unavailable) -> T {
    guard let hook = Self.hook else { throw Unavailable() }
    let clock = VirtualClock(world: self)
    condition.withLock {
      self.speedup = speedup
      self.shuffle = shuffle
      offset = .zero
      if !started {
        started = true
        Thread { [self] in drive() }.start()
      }
    }
    hook.pointee = { job, _ in VirtualWorld.shared.enqueue(job) }
    // From here on every global job, this task's own included, runs on the driver thread.
    let task = Task {
      // Set here, on the driver, not before the task exists: a driver that found no job yet
      // would otherwise take the world for stuck.
      self.condition.withLock { self.advancing = true }
      let result = await body(clock)
      // Still inside a job of the driver: the clock cannot have moved since `body` returned.
      self.condition.withLock { self.advancing = false }
      return result
    }
    return await task.value
  }

  func sleep(until deadline: Duration) async throws {
    let id = condition.withLock {
      nextID += 1
      return nextID
    }
    try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation {
        (continuation: CheckedContinuation<Void, any Error>) in
        enum Outcome { case wait, due, cancelled }
        let outcome = condition.withLock { () -> Outcome in
          if cancelled.remove(id) != nil { return .cancelled }
          if deadline <= offset { return .due }
          sleepers.append(Sleeper(deadline: deadline, id: id, continuation: continuation))
          condition.signal()
          return .wait
        }
        switch outcome {
        case .wait: break
        case .due: continuation.resume()
        case .cancelled: continuation.resume(throwing: CancellationError())
        }
      }
    } onCancel: {
      let continuation = condition.withLock { () -> CheckedContinuation<Void, any Error>? in
        if let index = sleepers.firstIndex(where: { $0.id == id }) {
          return sleepers.remove(at: index).continuation
        }
        cancelled.insert(id)
        return nil
      }
      continuation?.resume(throwing: CancellationError())
    }
    // A cancellation that arrived after the sleeper woke leaves a stale mark; drop it.
    condition.withLock { _ = cancelled.remove(id) }
  }

  /// Ends every sleep still pending (it throws `CancellationError`) and lets what that wakes
  /// run, until no sleeper is left (at most `rounds` times): a run that is over leaves nothing
  /// that a later run's clock could wake.
  ///
  /// - Returns: The sleepers still pending after the last round (0 when quiet).
  func quiesce(rounds: Int = 50) async -> Int {
    for _ in 0..<rounds {
      let pending = condition.withLock { () -> [Sleeper] in
        defer { sleepers.removeAll() }
        return sleepers
      }
      if pending.isEmpty { return 0 }
      for sleeper in pending { sleeper.continuation.resume(throwing: CancellationError()) }
      await settled()
    }
    return condition.withLock { sleepers.count }
  }

  /// Returns once every runnable job has run, without moving the clock: what the world does
  /// in reaction to what the caller did (events delivered to the timeline's printers included)
  /// is done by then.
  func settled() async {
    await withCheckedContinuation { continuation in
      condition.withLock {
        settling.append(continuation)
        condition.signal()
      }
    }
  }

  func enqueue(_ job: UnownedJob) {
    condition.withLock {
      jobs.append(job)
      condition.signal()
    }
  }

  func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// The driver: runs the queued jobs one at a time; when none is left, moves the clock.
  private func drive() {
    while true {
      condition.lock()
      if head < jobs.count {
        if var state = shuffle, jobs.count - head > 1 {
          // Swap a seeded pick into the head, then run it as the head.
          let pick = head + Int(Self.next(&state) % UInt64(jobs.count - head))
          shuffle = state
          jobs.swapAt(head, pick)
        }
        let job = jobs[head]
        head += 1
        if head == jobs.count {
          jobs.removeAll(keepingCapacity: true)
          head = 0
        }
        condition.unlock()
        job.runSynchronously(on: asUnownedSerialExecutor())
        continue
      }
      // Idle: nothing can run until a sleeper wakes. Those waiting for that come first.
      if !settling.isEmpty {
        let waiting = settling
        settling.removeAll()
        condition.unlock()
        for continuation in waiting { continuation.resume() }
        continue
      }
      if advancing, sleepers.isEmpty, shuffle != nil, let onStuck {
        let at = offset
        condition.unlock()
        onStuck(at)
        continue
      }
      guard advancing, let next = sleepers.map(\.deadline).min() else {
        condition.wait()
        condition.unlock()
        continue
      }
      let pause = speedup > 0 ? (next - offset).seconds / Double(speedup) : 0
      condition.unlock()
      if pause > 0 { Thread.sleep(forTimeInterval: pause) }
      condition.lock()
      offset = max(offset, next)
      // Sleepers were appended in the order they went to sleep: wake the due ones in it.
      let due = sleepers.filter { $0.deadline <= offset }
      sleepers.removeAll { $0.deadline <= offset }
      condition.unlock()
      for sleeper in due { sleeper.continuation.resume() }
    }
  }

  /// SplitMix64's step.
  private static func next(_ state: inout UInt64) -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  private typealias Original = @convention(thin) (UnownedJob) -> Void
  private typealias Hook = @convention(thin) (UnownedJob, Original) -> Void

  /// The runtime's hook for jobs headed to the global concurrent executor (the one
  /// swift-concurrency-extras' `withMainSerialExecutor` uses), or nil if this runtime lacks it.
  nonisolated(unsafe) private static let hook: UnsafeMutablePointer<Hook?>? = {
    guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "swift_task_enqueueGlobal_hook") else {
      return nil
    }
    return symbol.assumingMemoryBound(to: Hook?.self)
  }()
}
