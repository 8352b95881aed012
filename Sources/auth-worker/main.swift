// auth-worker: one process of the multi-process tests (Tests/MultiProcessTests).
//
// Runs ONE AuthCoordinator on a FileTokenStore and a FileAuthorizationLease shared with the other
// workers, against the tests' rotating token server (a SIMULATED integrator server on 127.0.0.1,
// Tests/Support/RotatingTokenServer). The tokens are fakes issued by that test server: printing
// them here is fine (a library never prints tokens).
//
//   auth-worker <scenario> --store <path> --server <http://127.0.0.1:port> [options]
//
// The worker prints "ready", waits for a line "go" on stdin (so that a test starts every worker
// at once), runs the scenario and prints one JSON line that starts with {"result":. Then it
// exits 0 when stdin says "quit" or closes (at once with --exit-at-once: a process that ends as
// soon as it got its token, like a command-line tool or an extension the system suspends).
//
// Scenarios:
//   wave   --callers N            N concurrent authModel(.ifNeeded) calls.
//   storm  --callers N --reject T N concurrent forced refreshes rejecting T.
//   soak   --refreshes M          M forced refreshes in a row, each rejecting the token the one
//                                 before served.
//   churn  [--callers K]          K loops of forced refreshes (each rejecting the token its loop
//                                 last saw) until stdin says "quit" or closes; prints
//                                 "served <epoch ms> <wait ms> <token>" or
//                                 "error <epoch ms> <wait ms> <code>" after each call.
//   serve  [--interval-ms I]      an authModel(.ifNeeded) every I ms (default 5) until stdin says
//                                 "quit" or closes; prints "served <epoch ms> <token>" or
//                                 "error <epoch ms> <code>" after each call. The stdin command
//                                 "logout" signs the key's user out in this process and prints
//                                 "logged-out <epoch ms before> <epoch ms after>"; the worker
//                                 then stops serving ("stop" stops it without a logout).
//
// Options: --key <mcUid> (default u1), --timeout-ms (each call's own timeout, default 10000),
// --lease-ttl-ms (Configuration.leaseTimeToLive, default 15000), --no-lease (no lease: the
// negative control), --max-forced (Configuration.maxForcedAuthorizations), --deadline-ms (the
// whole run; past it the worker prints {"error":"deadline"} and exits 3; default 60000),
// --exit-at-once (see above), --login-after-refusal (a refresh the server refuses with
// invalid_grant is reported as `AuthCoordinatorError.refusesRefreshToken`, as OAuth2Authorizer
// does: the coordinator never sends that refresh token again and its next authorization starts a
// new family; by default the refusal is a plain error and the worker never logs in anew),
// --trace-grants (prints "grant <monotonic s> <refresh token>" when the coordinator hands a
// refresh to the authorizer, on the token server's clock: see `monotonicSeconds()`; then
// "answer <monotonic s> <spent> <new refresh token>" or "refused <monotonic s> <spent> <why>",
// and "event <monotonic s> <event>" for the coordinator's store and lease events).
//
// Every wait is measured on the monotonic clock; the result reports the longest, so that a test
// can check that no caller waited past its own deadline.
//
// Exit status: 0 on success, 2 on a usage error, 3 past --deadline-ms, 4 when stdin closed
// before the run ended (the test went away).

import AuthCoordinator
import Foundation
import TokenStore

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Writes a line to stdout with one unbuffered `write(2)`, so that a SIGKILL never loses a line
/// that was reported, and lines of concurrent tasks never interleave.
func emit(_ line: String) {
  var bytes = Array((line + "\n").utf8)
  var offset = 0
  while offset < bytes.count {
    let written = bytes.withUnsafeMutableBytes {
      write(1, $0.baseAddress! + offset, $0.count - offset)
    }
    if written < 0 {
      if errno == EINTR { continue }
      exit(1)
    }
    offset += written
  }
}

/// One JSON object on one line.
func emitJSON(_ object: [String: Any]) {
  let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
  emit(String(decoding: data, as: UTF8.self))
}

func usage(_ message: String) -> Never {
  FileHandle.standardError.write(
    Data(
      """
      auth-worker: \(message)
      usage: auth-worker wave|storm|soak|churn|serve --store <path> --server <url> \
      [--key <mcUid>] [--callers N] [--reject T] [--refreshes M] [--interval-ms I] \
      [--timeout-ms T] [--lease-ttl-ms L] [--no-lease] [--max-forced N] [--deadline-ms D] \
      [--exit-at-once] [--login-after-refusal] [--trace-grants]

      """.utf8))
  exit(2)
}

/// Wall-clock milliseconds since 1970: every worker on the host shares this clock.
func epochMilliseconds() -> Int64 { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

func milliseconds(_ duration: Duration) -> Double { duration.seconds * 1000 }

/// Seconds on the clock of the token server's `time.monotonic()` (CLOCK_MONOTONIC on Linux,
/// CLOCK_UPTIME_RAW on Darwin), which every process on the host shares. Not `ContinuousClock`:
/// on Linux it reads CLOCK_BOOTTIME.
func monotonicSeconds() -> Double {
  var time = timespec()
  #if canImport(Darwin)
    clock_gettime(CLOCK_UPTIME_RAW, &time)
  #else
    clock_gettime(CLOCK_MONOTONIC, &time)
  #endif
  return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// The error's stable code, for the result.
func code(of error: any Error) -> String {
  if let error = error as? AuthCoordinatorError { return error.code.rawValue }
  if error is CancellationError { return "cancelled" }
  return String(describing: type(of: error))
}

/// A value behind a lock.
final class Locked<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Value
  init(_ value: Value) { self.value = value }
  func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
    lock.lock()
    defer { lock.unlock() }
    return try body(&value)
  }
}

/// What a group of calls got.
struct Tally: Sendable {
  var served = 0
  var tokens: [String: Int] = [:]
  var errors: [String: Int] = [:]
  var maxWaitMilliseconds = 0.0

  mutating func record(_ outcome: Result<String, any Error>, waited: Double) {
    maxWaitMilliseconds = max(maxWaitMilliseconds, waited)
    switch outcome {
    case .success(let token):
      served += 1
      tokens[token, default: 0] += 1
    case .failure(let error):
      errors[code(of: error), default: 0] += 1
    }
  }

  var json: [String: Any] {
    ["served": served, "tokens": tokens, "errors": errors, "max_wait_ms": maxWaitMilliseconds]
  }
}

/// The stdin lines after "go", as a stream (a thread reads them; the stream ends at end of file).
func stdinLines() -> AsyncStream<String> {
  let (stream, continuation) = AsyncStream.makeStream(of: String.self)
  Thread.detachNewThread {
    while let line = readLine() {
      continuation.yield(line.trimmingCharacters(in: .whitespaces))
    }
    continuation.finish()
  }
  return stream
}

/// Ends the process when stdin says "quit" or closes: with status 0 once the result is out
/// (`finished`), 4 before (the test went away).
func exitOnQuit(_ lines: AsyncStream<String>, finished: Locked<Bool>) {
  Task.detached {
    for await line in lines where line == "quit" { break }
    if finished.withLock({ $0 }) { exit(0) }
    emit("{\"error\":\"stdin closed\"}")
    exit(4)
  }
}

struct Worker {
  let options: Options
  let coordinator: AuthCoordinator
  let counts: Locked<AuthorizerCounts>
  let key: AccountKey
  let timeout: Duration
  let clock = ContinuousClock()

  init(options: Options) {
    self.options = options
    let store = FileTokenStore(url: options.store!)
    let lease: (any AuthorizationLease)? =
      options.useLease ? FileAuthorizationLease(nextTo: store) : nil
    var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(30))
    configuration.leaseTimeToLive = .milliseconds(options.leaseTimeToLiveMilliseconds)
    if let maxForced = options.maxForced { configuration.maxForcedAuthorizations = maxForced }
    let sessionConfiguration = URLSessionConfiguration.ephemeral
    sessionConfiguration.timeoutIntervalForRequest = 30
    sessionConfiguration.httpMaximumConnectionsPerHost = 4
    let counts = Locked(AuthorizerCounts())
    self.counts = counts
    coordinator = AuthCoordinator(
      store: store, lease: lease,
      authorizer: SimulatedIntegratorAuthorizer(
        endpoint: options.server!, session: URLSession(configuration: sessionConfiguration),
        counts: counts, loginAfterRefusal: options.loginAfterRefusal,
        traceGrants: options.traceGrants),
      configuration: configuration)
    key = AccountKey(account: options.key)
    timeout = .milliseconds(options.timeoutMilliseconds)
  }

  /// One call, measured.
  func call(_ refresh: RefreshPolicy) async -> (Result<String, any Error>, Double) {
    let start = clock.now
    do {
      let model = try await coordinator.authModel(for: key, refresh: refresh, timeout: timeout)
      return (.success(model.accessToken), milliseconds(clock.now - start))
    } catch {
      return (.failure(error), milliseconds(clock.now - start))
    }
  }

  /// `callers` concurrent calls.
  func concurrent(_ refresh: RefreshPolicy) async -> Tally {
    await withTaskGroup(of: (Result<String, any Error>, Double).self) { group in
      for _ in 0..<options.callers {
        group.addTask { await call(refresh) }
      }
      var tally = Tally()
      for await (outcome, waited) in group { tally.record(outcome, waited: waited) }
      return tally
    }
  }

  func soak() async -> Tally {
    var tally = Tally()
    var last: String?
    for _ in 0..<options.refreshes {
      let (outcome, waited) = await call(.force(rejecting: last))
      tally.record(outcome, waited: waited)
      if case .success(let token) = outcome { last = token }
    }
    return tally
  }

  func churn(_ commands: AsyncStream<String>) async -> Tally {
    let stop = Locked(false)
    let tally = Locked(Tally())
    let loops = Task {
      await withTaskGroup(of: Void.self) { group in
        for _ in 0..<max(1, options.callers) {
          group.addTask {
            var last: String?
            while !stop.withLock({ $0 }) {
              let (outcome, waited) = await call(.force(rejecting: last))
              tally.withLock { $0.record(outcome, waited: waited) }
              switch outcome {
              case .success(let token):
                last = token
                emit("served \(epochMilliseconds()) \(Int(waited)) \(token)")
              case .failure(let error):
                emit("error \(epochMilliseconds()) \(Int(waited)) \(code(of: error))")
              }
            }
          }
        }
      }
    }
    for await command in commands where command == "quit" { break }
    stop.withLock { $0 = true }
    await loops.value
    return tally.withLock { $0 }
  }

  func serve(_ commands: AsyncStream<String>) async -> Tally {
    let stop = Locked(false)
    let tally = Locked(Tally())
    let loop = Task {
      while !stop.withLock({ $0 }) {
        let (outcome, waited) = await call(.ifNeeded)
        tally.withLock { $0.record(outcome, waited: waited) }
        switch outcome {
        case .success(let token): emit("served \(epochMilliseconds()) \(token)")
        case .failure(let error): emit("error \(epochMilliseconds()) \(code(of: error))")
        }
        try? await Task.sleep(for: .milliseconds(options.intervalMilliseconds))
      }
    }
    for await command in commands {
      if command == "quit" { break }
      if command == "stop" { stop.withLock { $0 = true } }
      if command == "logout" {
        stop.withLock { $0 = true }
        await loop.value
        let before = epochMilliseconds()
        await coordinator.accountStatusChanged(.logout(account: key.account))
        emit("logged-out \(before) \(epochMilliseconds())")
      }
    }
    stop.withLock { $0 = true }
    await loop.value
    return tally.withLock { $0 }
  }

  func run() async {
    emit("ready")
    while let line = readLine() {
      if line.trimmingCharacters(in: .whitespaces) == "go" { break }
    }
    let deadline = options.deadlineMilliseconds
    Thread.detachNewThread {
      usleep(useconds_t(min(deadline, 3_600_000)) * 1000)
      emit("{\"error\":\"deadline\"}")
      exit(3)
    }
    if options.traceGrants {
      // What became of a grant's result: saves that failed or were refused, leases lost.
      let events = coordinator.events
      Task {
        for await event in events {
          switch event {
          case .storeFailed, .modelUnsaved, .saveRetryFailed, .unsavedModelSaved,
            .unsavedModelDropped, .leaseLost, .leaseHoldEnded, .lateResultSaved:
            emit("event \(monotonicSeconds()) \(event)")
          default: break
          }
        }
      }
    }
    let lines = stdinLines()
    let finished = Locked(false)
    let start = clock.now
    let tally: Tally
    switch options.scenario {
    case "wave":
      exitOnQuit(lines, finished: finished)
      tally = await concurrent(.ifNeeded)
    case "storm":
      exitOnQuit(lines, finished: finished)
      tally = await concurrent(.force(rejecting: options.reject))
    case "soak":
      exitOnQuit(lines, finished: finished)
      tally = await soak()
    case "churn":
      tally = await churn(lines)
    case "serve":
      tally = await serve(lines)
    default:
      usage("unknown scenario \(options.scenario)")
    }
    var result = tally.json
    let authorizations = counts.withLock { $0 }
    result["scenario"] = options.scenario
    result["pid"] = Int(getpid())
    result["elapsed_ms"] = milliseconds(clock.now - start)
    result["authorizations"] = [
      "started": authorizations.started, "succeeded": authorizations.succeeded,
      "failed": authorizations.failed, "refresh_grants": authorizations.refreshGrants,
      "new_families": authorizations.newFamilies,
    ]
    emitJSON(["result": result])
    finished.withLock { $0 = true }
    guard ["wave", "storm", "soak"].contains(options.scenario), !options.exitAtOnce else { return }
    // Stays up, as an app does after it got its token, until stdin says "quit" or closes:
    // whatever the coordinator still does after serving (releasing the lease) gets done.
    while true { try? await Task.sleep(for: .seconds(3600)) }
  }
}

let worker = Worker(options: Options.parse(Array(CommandLine.arguments.dropFirst())))
await worker.run()
exit(0)
