import AppConfigDoctor
import Foundation

/// `authcoord doctor <Info.plist> [--scheme NAME] [--strict]`: checks an app's Info.plist for
/// what Alipay account connect needs.
///
/// Prints one line per finding to standard output (`error: <keyPath>: <message>` or
/// `warning: <keyPath>: <message>`), then, when there is no error, an `ok:` line saying that
/// only Info.plist was checked and where the rest of the checklist is. Exit status:
/// - `0`: no error (warnings allowed, unless `--strict`);
/// - `1`: at least one error (what the vendor guide requires), or a warning with `--strict`;
/// - `2`: bad usage (usage on standard error), or a file that cannot be read or is not a
///   property-list dictionary (`error: <path>: <reason>` on standard error).
enum DoctorCommand {
  /// The usage text.
  static let usage = """
    usage: authcoord doctor <Info.plist> [--scheme NAME] [--strict]

    Checks an Info.plist (XML or binary) for Alipay account connect: LSApplicationQueriesSchemes
    has alipay and alipays, CFBundleURLTypes declares the app's scheme (NAME, when given), and
    MPAuthIdentity (if present) holds real values, not placeholders. Info.plist only: the
    guide's other steps are in the checklist of the AlipayBridge article
    "Integrating the coordinator in an iOS app" (IntegratingInAnIOSApp.md).
    --strict  also fail on warnings (suspicious but possibly correct values).
    Exit status: 0 no error, 1 errors (or warnings with --strict), 2 usage or unreadable file.
    """

  /// The `ok:` line: what was checked, and where the rest of the checklist is.
  static func okLine(path: String, warnings: Int) -> String {
    let noted = warnings == 0 ? "" : " (\(warnings) warning\(warnings == 1 ? "" : "s") above)"
    return "ok: \(path): the Info.plist entries for account connect are in place\(noted). "
      + "Only Info.plist was checked; the steps outside it are in the checklist "
      + "\"Steps outside Info.plist\" of the AlipayBridge article \"Integrating the coordinator "
      + "in an iOS app\" (IntegratingInAnIOSApp.md)."
  }

  /// Runs the command, printing to standard output and standard error.
  ///
  /// - Parameter arguments: The arguments after `doctor`.
  /// - Returns: The exit status: 0 no error, 1 errors (or warnings with `--strict`), 2 bad usage
  ///   or unreadable file.
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
    for finding in findings { output(finding.description) }
    let errors = findings.filter { $0.severity == .error }.count
    let warnings = findings.count - errors
    guard errors == 0 else { return 1 }
    output(okLine(path: options.path, warnings: warnings))
    return options.strict && warnings > 0 ? 1 : 0
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
    /// Whether warnings fail too.
    var strict = false

    /// Parses `<Info.plist> [--scheme NAME] [--strict]` (also `--scheme=NAME`, `-h`, `--help`).
    static func parse(_ arguments: [String]) -> Parsed {
      var path: String?
      var scheme: String?
      var strict = false
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
        case "--strict":
          strict = true
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
      return .run(Options(path: path, scheme: scheme, strict: strict))
    }
  }
}
