import AppConfigDoctor
import Foundation

/// `authcoord doctor <Info.plist> [--scheme NAME] [--universal-link URL --entitlements PATH]
/// [--strict]`: checks an app's Info.plist for what Alipay account connect needs, and, for an
/// app that opts in with `--universal-link`, that its entitlements list the link's associated
/// domain (`applinks:<host>`).
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
    usage: authcoord doctor <Info.plist> [--scheme NAME] [--universal-link URL \
             --entitlements PATH] [--strict]

    Checks an Info.plist (XML or binary) for Alipay account connect: LSApplicationQueriesSchemes
    has alipay and alipays, CFBundleURLTypes declares the app's scheme (NAME, when given), and
    MPAuthIdentity (if present) holds real values, not placeholders. Info.plist only: the
    guide's other steps are in the checklist of the AlipayBridge article
    "Integrating the coordinator in an iOS app" (IntegratingInAnIOSApp.md).
    --universal-link URL   the app's universal link for Alipay (https://example.com/alipay/);
                           with it, the entitlements must list applinks:<host>.
    --entitlements PATH    the app's .entitlements plist (required with --universal-link).
    --strict  also fail on warnings (suspicious but possibly correct values).
    Exit status: 0 no error, 1 errors (or warnings with --strict), 2 usage or unreadable file.
    """

  /// The `ok:` line: what was checked, and where the rest of the checklist is.
  ///
  /// - Parameters:
  ///   - path: The Info.plist's path.
  ///   - warnings: How many warnings were printed.
  ///   - entitlements: The entitlements' path, when the app opted in to the associated-domain
  ///     check; `nil` otherwise.
  static func okLine(path: String, warnings: Int, entitlements: String? = nil) -> String {
    let noted = warnings == 0 ? "" : " (\(warnings) warning\(warnings == 1 ? "" : "s") above)"
    guard let entitlements else {
      return "ok: \(path): the Info.plist entries for account connect are in place\(noted). "
        + "Only Info.plist was checked; the steps outside it are in the checklist "
        + "\"Steps outside Info.plist\" of the AlipayBridge article \"Integrating the "
        + "coordinator in an iOS app\" (IntegratingInAnIOSApp.md)."
    }
    return "ok: \(path): the Info.plist entries for account connect are in place, and "
      + "\(entitlements) lists the universal link's associated domain\(noted). Only Info.plist "
      + "and the associated domains were checked; the steps outside them are in the checklist "
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
    var findings = InfoPlistDoctor.check(plist: plist, scheme: options.scheme)
    if let universalLink = options.universalLink, let entitlementsPath = options.entitlements {
      let entitlements: [String: Any]
      do {
        entitlements = try InfoPlistDoctor.load(contentsOf: URL(fileURLWithPath: entitlementsPath))
      } catch {
        errorOutput("error: \(error)")
        return 2
      }
      findings += AssociatedDomainsCheck.check(
        entitlements: entitlements, universalLinkHost: universalLink.host)
    }
    for finding in findings { output(finding.description) }
    let errors = findings.filter { $0.severity == .error }.count
    let warnings = findings.count - errors
    guard errors == 0 else { return 1 }
    output(okLine(path: options.path, warnings: warnings, entitlements: options.entitlements))
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
    /// The app's universal link for Alipay, when it opted in to the associated-domain check.
    var universalLink: UniversalLink?
    /// The entitlements plist to check (given exactly when `universalLink` is).
    var entitlements: String?

    /// The `--universal-link` value.
    struct UniversalLink: Equatable {
      /// The link as given.
      var text: String
      /// Its host, lowercased.
      var host: String
    }

    /// Parses `<Info.plist> [--scheme NAME] [--universal-link URL --entitlements PATH]
    /// [--strict]` (also `--name=value` for the options with a value, `-h`, `--help`).
    static func parse(_ arguments: [String]) -> Parsed {
      var path: String?
      var scheme: String?
      var strict = false
      var universalLink: UniversalLink?
      var entitlements: String?
      var remaining = arguments[...]
      while let argument = remaining.popFirst() {
        if let (name, inline) = valueOption(argument) {
          guard let value = inline ?? remaining.popFirst(), !value.isEmpty,
            inline != nil || !value.hasPrefix("-")
          else { return .invalid("\(name) needs a value") }
          switch name {
          case "--universal-link":
            guard universalLink == nil else { return .invalid("--universal-link given twice") }
            guard let host = AssociatedDomainsCheck.host(ofUniversalLink: value) else {
              return .invalid("--universal-link must be an https URL with a host, got \(value)")
            }
            universalLink = UniversalLink(text: value, host: host)
          default:
            guard entitlements == nil else { return .invalid("--entitlements given twice") }
            entitlements = value
          }
          continue
        }
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
      if universalLink != nil, entitlements == nil {
        return .invalid("--universal-link needs --entitlements PATH (the app's .entitlements)")
      }
      if entitlements != nil, universalLink == nil {
        return .invalid("--entitlements is checked only with --universal-link URL")
      }
      return .run(
        Options(
          path: path, scheme: scheme, strict: strict, universalLink: universalLink,
          entitlements: entitlements))
    }

    /// `--universal-link` or `--entitlements`, with the value after `=` if given inline.
    private static func valueOption(_ argument: String) -> (String, String?)? {
      for name in ["--universal-link", "--entitlements"] {
        if argument == name { return (name, nil) }
        if argument.hasPrefix(name + "=") {
          return (name, String(argument.dropFirst(name.count + 1)))
        }
      }
      return nil
    }
  }
}
