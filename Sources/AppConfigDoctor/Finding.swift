/// One problem ``InfoPlistDoctor`` found in an app's Info.plist.
///
/// ```swift
/// for finding in InfoPlistDoctor.check(plist: plist, scheme: "myapp") {
///   print(finding)  // error: LSApplicationQueriesSchemes: does not contain "alipays"; ...
/// }
/// ```
public struct Finding: Hashable, Sendable, CustomStringConvertible {
  /// How serious a finding is.
  public enum Severity: String, Hashable, Sendable, CustomStringConvertible {
    /// Account connect cannot work as configured.
    case error
    /// Account connect may work, but the configuration is suspicious or fragile.
    case warning

    /// `error` or `warning`.
    public var description: String { rawValue }
  }

  /// A stable, machine-readable name for a kind of finding, for scripts that act on one kind.
  ///
  /// Only some findings have one (``code``); the others are told apart by their ``keyPath``.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The stable name, such as `associated_domain_missing`.
    public var rawValue: String

    /// Creates a code.
    ///
    /// - Parameter rawValue: The stable name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The entitlements do not list `applinks:<host>` for the app's universal-link host (the
    /// key is missing, or its array lacks the entry): iOS does not open the app for Alipay's
    /// universal-link returns.
    public static let associatedDomainMissing = Code(rawValue: "associated_domain_missing")
    /// `com.apple.developer.associated-domains` is not an array of strings.
    public static let associatedDomainsInvalid = Code(rawValue: "associated_domains_invalid")

    /// The stable name.
    public var description: String { rawValue }
  }

  /// How serious it is.
  public var severity: Severity
  /// Where it is, as a key path into the plist: `CFBundleURLTypes[0].CFBundleURLSchemes`.
  public var keyPath: String
  /// What is wrong and how to fix it.
  public var message: String
  /// The kind of finding, when it has a stable code.
  public var code: Code?

  /// Creates a finding.
  ///
  /// - Parameters:
  ///   - severity: How serious it is.
  ///   - keyPath: Where it is.
  ///   - message: What is wrong.
  ///   - code: The kind of finding, when it has a stable code.
  public init(_ severity: Severity, _ keyPath: String, _ message: String, code: Code? = nil) {
    self.severity = severity
    self.keyPath = keyPath
    self.message = message
    self.code = code
  }

  /// The finding as the `doctor` command prints it: `<severity>: <keyPath>: <message>`, then
  /// ` [<code>]` when it has a code.
  public var description: String {
    "\(severity): \(keyPath): \(message)" + (code.map { " [\($0)]" } ?? "")
  }
}
