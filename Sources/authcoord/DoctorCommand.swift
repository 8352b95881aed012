import AppConfigDoctor
import Foundation

/// `authcoord doctor <Info.plist> [--scheme NAME]`: checks an app's Info.plist for what Alipay
/// account connect needs.
///
/// Prints one line per finding to standard output (`error: <keyPath>: <message>` or
/// `warning: <keyPath>: <message>`), or `ok: <path> is configured for account connect` when
/// there is none. Exit status:
/// - `0`: no findings;
/// - `1`: at least one finding, error **or warning** (so a CI step notices a warning too);
/// - `2`: bad usage (usage on standard error), or a file that cannot be read or is not a
///   property-list dictionary (`error: <path>: <reason>` on standard error).
enum DoctorCommand {
  /// The usage text.
  static let usage = """
    usage: authcoord doctor <Info.plist> [--scheme NAME]

    Checks an Info.plist (XML or binary) for Alipay account connect: LSApplicationQueriesSchemes
    has alipay and alipays, CFBundleURLTypes declares the app's scheme (NAME, when given), and
    MPAuthIdentity (if present) holds real values, not placeholders.
    Exit status: 0 clean, 1 findings (errors or warnings), 2 usage or unreadable file.
    """

  /// Runs the command, printing to standard output and standard error.
  ///
  /// - Parameter arguments: The arguments after `doctor`.
  /// - Returns: The exit status: 0 clean, 1 findings, 2 bad usage or unreadable file.
  static func run(_ arguments: [String]) -> Int32 {
    run(
      arguments,
      output: { print($0) },
      errorOutput: { FileHandle.standardError.write(Data(($0 + "\n").utf8)) })
  }

  /// Runs the command with its output captured.
  ///
  /// - Parameters:
  ///   - arguments: The arguments after `doctor`.
  ///   - output: Receives each standard-output line.
  ///   - errorOutput: Receives each standard-error line.
  /// - Returns: The exit status.
  static func run(
    _ arguments: [String],
    output: (String) -> Void,
    errorOutput: (String) -> Void
  ) -> Int32 {
    let options: Options
    switch Options.parse(arguments) {
    case .help:
      output(usage)
      return 0
    case .invalid(let problem):
      errorOutput("error: \(problem)")
      errorOutput(usage)
      return 2
    case .run(let parsed):
      options = parsed
    }
    let plist: [String: Any]
    do {
      plist = try InfoPlistDoctor.load(contentsOf: URL(fileURLWithPath: options.path))
    } catch {
      errorOutput("error: \(error)")
      return 2
    }
    let findings = InfoPlistDoctor.check(plist: plist, scheme: options.scheme)
    guard !findings.isEmpty else {
      output("ok: \(options.path) is configured for account connect")
      return 0
    }
    for finding in findings { output(finding.description) }
    return 1
  }

  /// The parsed command line.
  struct Options: Equatable {
    /// What the arguments ask for.
    enum Parsed: Equatable {
      /// Print the usage and succeed.
      case help
      /// Bad usage, with the reason.
      case invalid(String)
      /// Check a file.
      case run(Options)
    }

    /// The Info.plist to check.
    var path: String
    /// The scheme `CFBundleURLTypes` must declare, if any.
    var scheme: String?

    /// Parses `<Info.plist> [--scheme NAME]` (also `--scheme=NAME`, `-h`, `--help`).
    static func parse(_ arguments: [String]) -> Parsed {
      var path: String?
      var scheme: String?
      var remaining = arguments[...]
      while let argument = remaining.popFirst() {
        switch argument {
        case "-h", "--help":
          return .help
        case "--scheme":
          guard let value = remaining.popFirst(), !value.isEmpty, !value.hasPrefix("-") else {
            return .invalid("--scheme needs a value")
          }
          guard scheme == nil else { return .invalid("--scheme given twice") }
          scheme = value
        case _ where argument.hasPrefix("--scheme="):
          let value = String(argument.dropFirst("--scheme=".count))
          guard !value.isEmpty else { return .invalid("--scheme needs a value") }
          guard scheme == nil else { return .invalid("--scheme given twice") }
          scheme = value
        case "--":
          guard let value = remaining.popFirst(), path == nil else {
            return .invalid("expected exactly one Info.plist path")
          }
          path = value
        case _ where argument.hasPrefix("-") && argument.count > 1:
          return .invalid("unknown option \(argument)")
        default:
          guard path == nil else { return .invalid("expected exactly one Info.plist path") }
          path = argument
        }
      }
      guard let path, !path.isEmpty else { return .invalid("missing the Info.plist path") }
      return .run(Options(path: path, scheme: scheme))
    }
  }
}
