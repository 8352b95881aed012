import Foundation

/// The command line.
struct Options: Sendable {
  var scenario = ""
  var store: URL?
  var server: URL?
  var key = "u1"
  var callers = 1
  var reject: String?
  var refreshes = 1
  var intervalMilliseconds = 5
  var timeoutMilliseconds = 10_000
  var leaseTimeToLiveMilliseconds = 15_000
  var useLease = true
  var maxForced: Int?
  var deadlineMilliseconds = 60_000
  var exitAtOnce = false
  var loginAfterRefusal = false
  var traceGrants = false

  static func parse(_ arguments: [String]) -> Options {
    var arguments = arguments
    guard !arguments.isEmpty else { usage("no scenario") }
    var options = Options()
    options.scenario = arguments.removeFirst()
    func number(_ name: String) -> Int {
      guard !arguments.isEmpty, let value = Int(arguments.removeFirst()), value >= 0 else {
        usage("\(name) needs a number")
      }
      return value
    }
    func text(_ name: String) -> String {
      guard !arguments.isEmpty else { usage("\(name) needs a value") }
      return arguments.removeFirst()
    }
    while !arguments.isEmpty {
      let name = arguments.removeFirst()
      switch name {
      case "--store": options.store = URL(fileURLWithPath: text(name))
      case "--server": options.server = URL(string: text(name))
      case "--key": options.key = text(name)
      case "--callers": options.callers = number(name)
      case "--reject": options.reject = text(name)
      case "--refreshes": options.refreshes = number(name)
      case "--interval-ms": options.intervalMilliseconds = number(name)
      case "--timeout-ms": options.timeoutMilliseconds = number(name)
      case "--lease-ttl-ms": options.leaseTimeToLiveMilliseconds = number(name)
      case "--no-lease": options.useLease = false
      case "--max-forced": options.maxForced = number(name)
      case "--deadline-ms": options.deadlineMilliseconds = number(name)
      case "--exit-at-once": options.exitAtOnce = true
      case "--login-after-refusal": options.loginAfterRefusal = true
      case "--trace-grants": options.traceGrants = true
      default: usage("unknown option \(name)")
      }
    }
    guard options.store != nil else { usage("--store is required") }
    guard options.server != nil else { usage("--server is required") }
    return options
  }
}
