import AlipayBridge
import AuthCoordinator
import Foundation

/// `authcoord simulate`: a customer app with many mini-programs opening at once, against a
/// simulated Alipay app, the integrator's server and a simulated Alipay gateway, all in process.
///
/// The coordinator, the silent-first authorizer, the Alipay auth-code provider, the URL router,
/// the callback parser, the app's request builders and reply parsers, and the integrator's
/// server (`AlipayBridgeServer`: its endpoints, its coordinator, its client of
/// `alipay.system.oauth.token`) are the real ones; only the Alipay app, Alipay's gateway and the
/// socket between app and server are simulated. Time is virtual: it moves only
/// when the simulated world is idle (``VirtualWorld``), so the outcome and the timeline are the
/// same on every machine; `--speedup` only paces the output (1000x by default).
///
/// `authcoord simulate --service` plays a Swift service instead (``ServiceSimulation``): one
/// token shared by its concurrent requests, against a simulated OAuth 2 token server and a
/// simulated API; the coordinator is the real one.
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
    /// The Swift-service demo (``ServiceSimulation``) instead of the Alipay one.
    var service = false
    /// `--service`: concurrent requests per wave.
    var requests = 2_000
    /// `--service`: how many times the token expires.
    var expiries = 100
    /// The flags given, to reject those of the other demo and to know which defaults apply.
    var given: Set<String> = []
  }

  /// The flags only the Alipay demo reads.
  static let alipayOnlyFlags = [
    "--opens", "--users", "--think-time", "--never-return", "--return-without-authorizing",
    "--refresh-loop", "--logout-mid-flight", "--processes",
  ]
  /// The flags only `--service` reads.
  static let serviceOnlyFlags = ["--requests", "--expiries"]

  static let usage = """
    usage: authcoord simulate [options]

    Plays a customer app whose mini-programs ask for the Alipay login state all at once, against
    a SIMULATED Alipay app, the integrator's server (the real AlipayBridgeServer) and a SIMULATED
    Alipay gateway, all in process, and prints a timeline and a summary. The app asks its server
    to refresh silently first and sends the user to Alipay only when the server says the user
    must authorize. The default run plays the token's life: a sign-in (1 bounce), expiries (0),
    an outage of the server (0), the refresh family's end (1), a cancellation in Alipay (1).
    Time is virtual: it moves only when the simulated world is idle, so the outcome and the
    timeline do not depend on the machine's speed or load.

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

    usage: authcoord simulate --fleet [options]   (see `authcoord simulate --fleet --help`)

    usage: authcoord simulate --service [options]

    Plays a Swift service that calls an API on its own behalf, its concurrent requests sharing
    one token through the real coordinator (a silent authorizer: isInteractive false), against
    a SIMULATED OAuth 2 token server (client_credentials, refresh tokens rotated on each use, a
    reuse revokes the token family) and a SIMULATED API, both in process: no network, no setup.
    Phases: a cold start, the token's expiries, six revocations of the access tokens in quick
    succession (the loop guard delays the fourth to sixth refresh), a token endpoint slower
    than the deadline, a flaky server, then two audiences (a token each from one authorizer)
    and a sign-out that revokes the account's tokens (RFC 7009). Time is virtual, as above.

    options with --service:
      --requests N                concurrent requests per wave (default 2000)
      --expiries N                how many times the token expires (default 100)
      --token-lifetime SECONDS    lifetime of the tokens, at least 600 (default 3600)
      --authorization-timeout SECONDS
                                  the coordinator's deadline, 1 to 60 (default 2); the slow
                                  endpoint answers in 2.5 times it
      --speedup N                 pacing only (default 1000000: the run spans 100+ virtual hours)
      --quiet                     print only the summary
    --opens, --users, --think-time, --never-return, --return-without-authorizing,
    --refresh-loop, --logout-mid-flight and --processes do not apply to --service; --requests
    and --expiries apply only to it.
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
      options.given.insert(flag)
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
      case "--service": options.service = true
      case "--requests": options.requests = try positiveInt(flag, max: 1_000_000)
      case "--expiries": options.expiries = try positiveInt(flag, max: 10_000)
      default: throw .invalid("unknown option '\(flag)'")
      }
      index += 1
    }
    if options.service { return try serviceOptions(options) }
    if let flag = serviceOnlyFlags.first(where: options.given.contains) {
      throw .invalid("\(flag) applies only to --service")
    }
    if options.neverReturn && options.returnWithoutAuthorizing {
      throw .invalid("--never-return and --return-without-authorizing exclude each other")
    }
    return options
  }

  /// Checks the options of `--service` and applies its defaults where no flag was given.
  private static func serviceOptions(_ parsed: Options) throws(ParseError) -> Options {
    var options = parsed
    if let flag = alipayOnlyFlags.first(where: options.given.contains) {
      throw .invalid("\(flag) does not apply to --service")
    }
    if !options.given.contains("--token-lifetime") { options.tokenLifetime = .seconds(3_600) }
    if !options.given.contains("--authorization-timeout") {
      options.authorizationTimeout = .seconds(2)
    }
    if !options.given.contains("--speedup") { options.speedup = 1_000_000 }
    guard options.tokenLifetime >= .seconds(600) else {
      throw .invalid("--token-lifetime takes at least 600 seconds with --service")
    }
    guard options.authorizationTimeout >= .seconds(1), options.authorizationTimeout <= .seconds(60)
    else {
      throw .invalid("--authorization-timeout takes 1 to 60 seconds with --service")
    }
    return options
  }

  /// Runs the command.
  ///
  /// - Parameter arguments: The arguments after `simulate`.
  /// - Returns: The exit status: 0 when the run went as the scenario expects, 1 when it did not,
  ///   2 for bad usage.
  static func run(_ arguments: [String]) async -> Int32 {
    // The fleet simulation has options of its own (``FleetSimulation``).
    if arguments.first == "--fleet" { return await FleetSimulation.run(arguments) }
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
        options.service
          ? await ServiceSimulation(options: options).run(clock: clock)
          : await Simulation(options: options).run(clock: clock)
      }
    } catch {
      FileHandle.standardError.write(Data("authcoord simulate: \(error)\n".utf8))
      return 1
    }
    print(report.summary)
    return report.asExpected ? 0 : 1
  }
}
