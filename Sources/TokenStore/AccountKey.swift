/// The kind of authorization the mini-program container asks for.
///
/// The SDK's `NBIAuthMode` is modelled as an open, string-backed type: only
/// ``platformOnly`` is confirmed by the vendor guide, and a new mode must not need a new
/// release of this package.
public struct AuthMode: RawRepresentable, Hashable, Sendable, Codable,
  ExpressibleByStringLiteral, CustomStringConvertible
{
  /// The mode's wire name.
  public var rawValue: String

  /// Creates a mode from its name.
  ///
  /// - Parameter rawValue: The mode's wire name.
  public init(rawValue: String) { self.rawValue = rawValue }

  /// Creates a mode from a string literal.
  ///
  /// - Parameter value: The mode's wire name.
  public init(stringLiteral value: String) { self.rawValue = value }

  /// `NBIAuthModePlatformOnly`, the one mode the vendor documents.
  public static let platformOnly: AuthMode = "platformOnly"

  /// The mode's name.
  public var description: String { rawValue }
}

/// Identifies one cached login: the host app's user and the authorization mode.
///
/// All requests for the same key are serialised by the coordinator; requests for different keys
/// proceed in parallel.
public struct AccountKey: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The host app's own user id (the "merchant" user, `mcUid`).
  public var mcUid: String
  /// The authorization mode.
  public var mode: AuthMode

  /// Creates a key.
  ///
  /// - Parameters:
  ///   - mcUid: The host app's own user id.
  ///   - mode: The authorization mode; ``AuthMode/platformOnly`` by default.
  public init(mcUid: String, mode: AuthMode = .platformOnly) {
    self.mcUid = mcUid
    self.mode = mode
  }

  /// `mcUid/mode`.
  public var description: String { "\(mcUid)/\(mode.rawValue)" }
}
