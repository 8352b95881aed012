/// Why ``InfoPlistDoctor/load(contentsOf:)`` could not produce a plist to check.
public struct InfoPlistLoadError: Error, Hashable, Sendable, CustomStringConvertible {
  /// A stable, machine-readable reason.
  public enum Code: String, Hashable, Sendable, CustomStringConvertible {
    /// The file does not exist or cannot be read.
    case unreadable
    /// The file is not a property list (neither XML, binary nor OpenStep).
    case invalid
    /// The file is a property list whose top level is not a dictionary.
    case notADictionary

    /// The stable name.
    public var description: String { rawValue }
  }

  /// Why it failed.
  public var code: Code
  /// The file's path.
  public var path: String
  /// A human-readable explanation.
  public var message: String

  /// Creates an error.
  ///
  /// - Parameters:
  ///   - code: Why it failed.
  ///   - path: The file's path.
  ///   - message: An explanation.
  public init(_ code: Code, path: String, message: String) {
    self.code = code
    self.path = path
    self.message = message
  }

  /// `<path>: <message>`.
  public var description: String { "\(path): \(message)" }
}
