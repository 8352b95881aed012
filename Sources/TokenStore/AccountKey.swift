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
/// "merchant" user; the Alipay bridge adds its spelling, `mcUid`).
///
/// All requests for the same key are serialised by the coordinator; requests for different keys
/// proceed in parallel.
///
/// The account id is kept in Unicode Normalization Form C ("José" typed precomposed or with a
/// combining accent is one key): Swift compares strings by canonical equivalence, but a file
/// or a database row compares bytes, and one account must be one key in memory, in files and
/// in rows alike. ``normalized(_:)`` is that normalization.
public struct AccountKey: Hashable, Sendable, Codable, CustomStringConvertible {
  /// The account or client id the token is for, in Normalization Form C.
  public var account: String {
    get { normalizedID }
    set { normalizedID = Self.normalized(newValue) }
  }
  /// The authorization mode.
  public var mode: AuthMode

  private var normalizedID: String

  /// Creates a key for an account or client id.
  ///
  /// - Parameters:
  ///   - account: The account or client id the token is for (normalized to Form C).
  ///   - mode: The authorization mode; ``AuthMode/platformOnly`` by default.
  public init(account: String, mode: AuthMode = .platformOnly) {
    self.normalizedID = Self.normalized(account)
    self.mode = mode
  }

  /// An account id in Unicode Normalization Form C, the form keys, files and rows use: pass
  /// ids through it wherever they are compared as bytes.
  ///
  /// - Parameter account: An account id, in any normalization form.
  /// - Returns: The same id in Form C (an ASCII id is returned as it is).
  public static func normalized(_ account: String) -> String {
    if account.utf8.allSatisfy({ $0 < 0x80 }) { return account }
    if PlantedBug.planted == .keyPerSpelling { return account }
    return account.precomposedStringWithCanonicalMapping
  }

  // The wire key of the account stays `mcUid`, the name the package first wrote: store files
  // on disk and PostgreSQL rows already hold it, and a rename would orphan them.
  private enum CodingKeys: String, CodingKey {
    case account = "mcUid"
    case mode
  }

  /// Decodes a key, normalizing its account id (a file written before normalization).
  ///
  /// - Parameter decoder: The decoder.
  /// - Throws: What the decoder throws.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.init(
      account: try container.decode(String.self, forKey: .account),
      mode: try container.decode(AuthMode.self, forKey: .mode))
  }

  /// Encodes the key as `mcUid` (the account, under the name files and rows already use) and
  /// `mode`.
  ///
  /// - Parameter encoder: The encoder.
  /// - Throws: What the encoder throws.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(account, forKey: .account)
    try container.encode(mode, forKey: .mode)
  }

  /// `account/mode`.
  public var description: String { "\(account)/\(mode.rawValue)" }
}
