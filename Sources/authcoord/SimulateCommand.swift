import AlipayBridge
import AuthCoordinator
import Foundation

/// `authcoord simulate`: a customer app with many mini-programs opening at once, against a
/// simulated Alipay app and a simulated integrator server, all in process.
///
/// The coordinator, the Alipay auth-code provider, the URL router and the callback parser are
/// the real ones; only the Alipay app and the server are simulated. Time is virtual: it moves only
/// when the simulated world is idle (``VirtualWorld``), so the outcome and the timeline are the
/// same on every machine; `--speedup` only paces the output (1000x by default).
enum SimulateCommand {
  struct Options: Equatable {
    var opens = 1_000
    var users = 1
    var tokenLifetime: Duration = .seconds(600)
    var thinkTime: Duration = .seconds(8)
    var authorizationTimeout: Duration = .seconds(120)
    var neverReturn = false
    var returnWithoutAuthorizing = false
    var refreshLoop = false
    var logoutMidFlight = false
    var speedup = 1_000
    var quiet = false
    /// Simulated processes sharing one store and one lease: the app, then extensions.
    var processes = 1
  }

  static let usage = """
    usage: authcoord simulate [options]

    Plays a customer app whose mini-programs ask for the Alipay login state all at once, against
    a simulated Alipay app and a simulated integrator server (in process), and prints a timeline
    and a summary. Time is virtual: it moves only when the simulated world is idle, so the outcome
    and the timeline do not depend on the machine's speed or load.

    options:
      --opens N                   concurrent mini-program opens per wave (default 1000)
      --users N                   distinct app users opening at once (default 1)
      --token-lifetime SECONDS    lifetime of the tokens the server issues (default 600)
      --think-time SECONDS        how long the user takes to authorize in Alipay (default 8)
      --authorization-timeout SECONDS
                                  the coordinator's authorization deadline (default 120)
      --never-return              the user goes to Alipay and never comes back
      --return-without-authorizing
                                  the user comes back without authorizing (no callback)
      --refresh-loop              the container keeps saying NeedRefreshToken = YES
      --logout-mid-flight         the user logs out of the app while in Alipay
      --processes N               simulated processes sharing one store, lease and authorization:
                                  the app and N-1 widgets that may not open Alipay (default 1)
      --speedup N                 pacing only: simulated seconds shown per real second
                                  (default 1000); changes no outcome and no timestamp
      --quiet                     print only the summary
      -h, --help                  show this help
    """

  enum ParseError: Error, Equatable {
    case help
    case invalid(String)
  }

  static func parse(_ arguments: [String]) throws(ParseError) -> Options {
    var options = Options()
    var index = 0
    func value(_ flag: String) throws(ParseError) -> String {
      index += 1
      guard index < arguments.count else { throw .invalid("\(flag) needs a value") }
      return arguments[index]
    }
    func positiveInt(_ flag: String, max: Int) throws(ParseError) -> Int {
      let text = try value(flag)
      guard let number = Int(text), number > 0, number <= max else {
        throw .invalid("\(flag) takes a whole number from 1 to \(max), not '\(text)'")
      }
      return number
    }
    func seconds(_ flag: String) throws(ParseError) -> Duration {
      let text = try value(flag)
      guard let number = Double(text), number.isFinite, number > 0, number <= 1e7 else {
        throw .invalid("\(flag) takes a positive number of seconds, not '\(text)'")
      }
      return .milliseconds(Int64(number * 1000))
    }
    while index < arguments.count {
      let flag = arguments[index]
      switch flag {
      case "-h", "--help": throw .help
      case "--opens": options.opens = try positiveInt(flag, max: 1_000_000)
      case "--users": options.users = try positiveInt(flag, max: 10_000)
      case "--token-lifetime": options.tokenLifetime = try seconds(flag)
      case "--think-time": options.thinkTime = try seconds(flag)
      case "--authorization-timeout": options.authorizationTimeout = try seconds(flag)
      case "--never-return": options.neverReturn = true
      case "--return-without-authorizing": options.returnWithoutAuthorizing = true
      case "--refresh-loop": options.refreshLoop = true
      case "--logout-mid-flight": options.logoutMidFlight = true
      case "--processes": options.processes = try positiveInt(flag, max: 64)
      case "--speedup": options.speedup = try positiveInt(flag, max: 1_000_000)
      case "--quiet": options.quiet = true
      default: throw .invalid("unknown option '\(flag)'")
      }
      index += 1
    }
    if options.neverReturn && options.returnWithoutAuthorizing {
      throw .invalid("--never-return and --return-without-authorizing exclude each other")
    }
    return options
  }

  /// Runs the command.
  ///
  /// - Parameter arguments: The arguments after `simulate`.
  /// - Returns: The exit status: 0 when the run went as the scenario expects, 1 when it did not,
  ///   2 for bad usage.
  static func run(_ arguments: [String]) async -> Int32 {
    let options: Options
    do {
      options = try parse(arguments)
    } catch {
      switch error {
      case .help:
        print(usage)
        return 0
      case .invalid(let message):
        FileHandle.standardError.write(Data("authcoord simulate: \(message)\n\n\(usage)\n".utf8))
        return 2
      }
    }
    let report: Simulation.Report
    do {
      report = try await VirtualWorld.shared.run(speedup: options.speedup) { clock in
        await Simulation(options: options).run(clock: clock)
      }
    } catch {
      FileHandle.standardError.write(Data("authcoord simulate: \(error)\n".utf8))
      return 1
    }
    print(report.summary)
    return report.asExpected ? 0 : 1
  }
}
