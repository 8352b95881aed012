import Foundation

/// A bounded pool of connections, each owned by a thread of its own: libpq never runs on a
/// thread of Swift's cooperative pool. A call waits in one queue for the next free worker;
/// its deadline (``PostgresConfiguration/callTimeout``) counts from when it was asked, so a
/// call that waited too long in the queue fails without touching the database.
///
/// A worker opens its connection when it first needs one, again after it broke, and again when
/// the server ended it while it sat idle (found before the call runs, so that costs the call
/// nothing: `PostgresConnection.endedWhileIdle()`); after a failed open it waits a jittered,
/// doubling delay (``PostgresConfiguration/reconnectDelay``) before the next, and calls in that
/// time fail at once with `connection_failed` instead of each waiting for a connect timeout.
final class PostgresPool: Sendable {
  private let queue: JobQueue
  private let configuration: PostgresConfiguration

  init(_ configuration: PostgresConfiguration, redactor: Redactor) {
    self.configuration = configuration
    let queue = JobQueue()
    self.queue = queue
    for index in 0..<configuration.poolSize {
      let worker = Thread {
        PostgresPool.work(queue: queue, configuration: configuration, redactor: redactor)
      }
      worker.name = "authcoord-postgres-\(index)"
      worker.start()
    }
  }

  deinit { queue.close() }

  /// Runs `body` on a worker's connection and returns its result.
  func run<T: Sendable>(
    _ body: @escaping @Sendable (PostgresConnection, ContinuousClock.Instant) throws -> T
  ) async throws -> T {
    let deadline = ContinuousClock.now.advanced(by: configuration.callTimeout)
    return try await withCheckedThrowingContinuation { continuation in
      let job = Job(deadline: deadline) { connection in
        switch connection {
        case .success(let connection):
          continuation.resume(with: Result { try body(connection, deadline) })
        case .failure(let error):
          continuation.resume(throwing: error)
        }
      }
      if !queue.put(job) {
        continuation.resume(throwing: PostgresError(.closed, "the database was closed"))
      }
    }
  }

  /// Stops the workers once the queued calls ran; later calls fail with `closed`.
  func close() { queue.close() }

  private static func work(
    queue: JobQueue, configuration: PostgresConfiguration, redactor: Redactor
  ) {
    var connection: PostgresConnection?
    var backoff = Backoff(configuration.reconnectDelay)
    while let job = queue.take() {
      guard ContinuousClock.now < job.deadline else {
        job.run(.failure(PostgresError(.timedOut, "no connection was free in time")))
        continue
      }
      // A connection the server ended while it sat idle is replaced before the call runs.
      let usable = connection.map { !$0.endedWhileIdle() } ?? false
      if !usable {
        connection = nil
        guard backoff.mayTry(at: .now) else {
          job.run(.failure(PostgresError(.connectionFailed, backoff.lastFailure)))
          continue
        }
        do {
          let connectDeadline = min(
            job.deadline, ContinuousClock.now.advanced(by: configuration.connectTimeout))
          connection = try PostgresConnection.open(
            configuration, redactor: redactor, deadline: connectDeadline)
          backoff.succeeded()
        } catch {
          backoff.failed(at: .now, message: "\(error)")
          job.run(.failure(error))
          continue
        }
      }
      job.run(.success(connection!))
    }
  }
}

/// A call waiting for a worker.
struct Job: Sendable {
  let deadline: ContinuousClock.Instant
  let run: @Sendable (Result<PostgresConnection, any Error>) -> Void

  init(
    deadline: ContinuousClock.Instant,
    _ run: @escaping @Sendable (Result<PostgresConnection, any Error>) -> Void
  ) {
    self.deadline = deadline
    self.run = run
  }
}

/// The pool's queue: many producers, the workers as consumers.
final class JobQueue: @unchecked Sendable {
  private let condition = NSCondition()
  private var jobs: [Job] = []
  private var head = 0
  private var closed = false

  /// Adds a job; `false` once closed.
  func put(_ job: Job) -> Bool {
    condition.lock()
    defer { condition.unlock() }
    guard !closed else { return false }
    jobs.append(job)
    condition.signal()
    return true
  }

  /// The next job, waiting for one; `nil` once closed and empty.
  func take() -> Job? {
    condition.lock()
    defer { condition.unlock() }
    while head == jobs.count && !closed { condition.wait() }
    guard head < jobs.count else { return nil }
    let job = jobs[head]
    head += 1
    if head > 64 && head * 2 > jobs.count {
      jobs.removeFirst(head)
      head = 0
    }
    return job
  }

  func close() {
    condition.lock()
    closed = true
    condition.broadcast()
    condition.unlock()
  }
}

/// Jittered, doubling delays between failed connection attempts.
struct Backoff {
  private let range: ClosedRange<Duration>
  private var delay: Duration
  private var notBefore: ContinuousClock.Instant?
  private(set) var lastFailure = "the database could not be reached"

  init(_ range: ClosedRange<Duration>) {
    self.range = range
    self.delay = range.lowerBound
  }

  func mayTry(at now: ContinuousClock.Instant) -> Bool {
    notBefore.map { now >= $0 } ?? true
  }

  mutating func failed(at now: ContinuousClock.Instant, message: String) {
    lastFailure = message
    // Between half and all of the current delay ("equal jitter"), so that replicas that lost
    // the server at the same instant do not all come back at the same one.
    let fraction = Double.random(in: 0.5...1)
    notBefore = now.advanced(by: delay * fraction)
    delay = min(delay * 2, range.upperBound)
  }

  mutating func succeeded() {
    delay = range.lowerBound
    notBefore = nil
  }
}
