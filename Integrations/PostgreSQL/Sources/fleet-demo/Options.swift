import Foundation

/// The demo's flags.
struct Options {
  var replicas = 4
  var callers = 500
  var delayMilliseconds = 300
  var timeToLiveMilliseconds = 2_000
  var killHolder = false
  var pollOnly = false
  /// With a positive value, a rotation soak: callers keep asking for this long while the
  /// provider's tokens expire every `lifetimeMilliseconds`.
  var soakSeconds = 0
  var lifetimeMilliseconds = 1_000
  var json = false
  var account = "alice"
  var connection = ProcessInfo.processInfo.environment["AUTHCOORD_PG_CONNINFO"] ?? ""
  // Set by the parent for its replicas.
  var isReplica = false
  var index = 0
  var directory = ""
  var schema = ""
  var epoch = 0.0

  static let usage = """
    usage: fleet-demo [--replicas N] [--callers N] [--delay-ms N] [--ttl-ms N] [--kill-holder]
                      [--poll-only] [--soak-seconds N [--lifetime-ms N]] [--json]

    Starts N replica processes, each with its own coordinator on one PostgreSQL database (from
    AUTHCOORD_PG_CONNINFO; scripts/with-postgres.sh starts a throwaway server), and has each ask
    for one expired login state from N callers at once. Prints the timeline and exits 0 only if
    the whole fleet made one authorization, spent no refresh token twice and every caller got
    the same token. The identity provider is SIMULATED (a file shared by the replicas).

      --replicas N     replica processes (default 4, at most 64)
      --callers N      concurrent callers per replica (default 500)
      --delay-ms N     the simulated provider's latency (default 300)
      --ttl-ms N       the lease's time to live (default 2000)
      --kill-holder    SIGKILL the replica that is authorizing; another must take over
      --poll-only      the replicas' listeners poll instead of LISTEN (to compare wake-ups)
      --soak-seconds N a rotation soak instead: every caller keeps asking for N seconds while
                       the provider's tokens expire every --lifetime-ms (default 1000); passes
                       only with 0 refresh-token reuses, 0 revoked families, 0 failed calls
      --json           print the summary as one JSON object
    """

  init(_ arguments: [String]) throws {
    var rest = arguments[...]
    func value(_ flag: String) throws -> String {
      guard let next = rest.popFirst() else { throw UsageError("\(flag) needs a value") }
      return next
    }
    func number(_ flag: String, in range: ClosedRange<Int>) throws -> Int {
      guard let number = Int(try value(flag)), range.contains(number) else {
        throw UsageError("\(flag) must be a whole number in \(range)")
      }
      return number
    }
    while let flag = rest.popFirst() {
      switch flag {
      case "replica": isReplica = true
      case "--replicas": replicas = try number(flag, in: 1...64)
      case "--callers": callers = try number(flag, in: 1...100_000)
      case "--delay-ms": delayMilliseconds = try number(flag, in: 0...60_000)
      case "--ttl-ms": timeToLiveMilliseconds = try number(flag, in: 100...600_000)
      case "--kill-holder": killHolder = true
      case "--poll-only": pollOnly = true
      case "--soak-seconds": soakSeconds = try number(flag, in: 0...3_600)
      case "--lifetime-ms": lifetimeMilliseconds = try number(flag, in: 200...3_600_000)
      case "--json": json = true
      case "--account": account = try value(flag)
      case "--index": index = try number(flag, in: 0...63)
      case "--directory": directory = try value(flag)
      case "--schema": schema = try value(flag)
      case "--epoch":
        guard let epoch = Double(try value(flag)) else { throw UsageError("--epoch: a number") }
        self.epoch = epoch
      case "-h", "--help": throw UsageError(nil)
      default: throw UsageError("unknown argument \(flag)")
      }
    }
    guard !connection.isEmpty else {
      throw UsageError("set AUTHCOORD_PG_CONNINFO (or run under scripts/with-postgres.sh)")
    }
  }

  /// The arguments that make a child process replica `index` of this run.
  func replicaArguments(index: Int, directory: String, schema: String, epoch: Double) -> [String] {
    [
      "replica", "--index", "\(index)", "--directory", directory, "--schema", schema, "--epoch",
      "\(epoch)", "--callers", "\(callers)", "--delay-ms", "\(delayMilliseconds)", "--ttl-ms",
      "\(timeToLiveMilliseconds)", "--account", account, "--soak-seconds", "\(soakSeconds)",
      "--lifetime-ms", "\(lifetimeMilliseconds)",
    ] + (pollOnly ? ["--poll-only"] : [])
  }
}

struct UsageError: Error {
  let message: String?
  init(_ message: String?) { self.message = message }
}
