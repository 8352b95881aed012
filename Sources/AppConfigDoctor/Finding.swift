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

  /// How serious it is.
  public var severity: Severity
  /// Where it is, as a key path into the plist: `CFBundleURLTypes[0].CFBundleURLSchemes`.
  public var keyPath: String
  /// What is wrong and how to fix it.
  public var message: String

  /// Creates a finding.
  ///
  /// - Parameters:
  ///   - severity: How serious it is.
  ///   - keyPath: Where it is.
  ///   - message: What is wrong.
  public init(_ severity: Severity, _ keyPath: String, _ message: String) {
    self.severity = severity
    self.keyPath = keyPath
    self.message = message
  }

  /// The finding as the `doctor` command prints it: `<severity>: <keyPath>: <message>`.
  public var description: String { "\(severity): \(keyPath): \(message)" }
}
