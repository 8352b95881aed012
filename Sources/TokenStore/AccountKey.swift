/// The kind of authorization an account's token is for: a scope, an audience, or (for an Alipay
/// mini-program) the container's `NBIAuthMode`.
///
/// An open, string-backed type: a service names its own modes (`"read"`, `"admin"`) and most use
/// the default, ``platformOnly``; for the Alipay bridge, only ``platformOnly`` is confirmed by
/// the vendor guide, and a new mode must not need a new release of this package.
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

  /// The default mode; for the Alipay bridge, `NBIAuthModePlatformOnly`, the one mode the vendor
  /// documents.
  public static let platformOnly: AuthMode = "platformOnly"

  /// The mode's name.
  public var description: String { rawValue }
}

/// Identifies one cached token: the account it belongs to and the authorization mode.
///
/// For a service, the account is a plain account or client id: `AccountKey(account:
/// "billing-client")`. For an Alipay mini-program, it is the host app's own user id (the
/// "merchant" user, `mcUid`): ``account`` and ``mcUid`` are two names of the same value.
///
/// All requests for the same key are serialised by the coordinator; requests for different keys
/// proceed in parallel.
public struct AccountKey: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The account's id: the host app's own user id in the Alipay bridge's vocabulary
  /// (`mcUid`). The same value as ``account``.
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

  /// Creates a key for a service's account or client id.
  ///
  /// - Parameters:
  ///   - account: The account or client id the token is for.
  ///   - mode: The authorization mode; ``AuthMode/platformOnly`` by default.
  public init(account: String, mode: AuthMode = .platformOnly) {
    self.init(mcUid: account, mode: mode)
  }

  /// The account or client id the token is for: the same value as ``mcUid``.
  public var account: String {
    get { mcUid }
    set { mcUid = newValue }
  }

  /// `account/mode`.
  public var description: String { "\(mcUid)/\(mode.rawValue)" }
}
