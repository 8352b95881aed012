import Foundation

/// An account's login state: the access token, when it expires, the refresh token when the
/// server issued one, the account it belongs to and, optionally, the user behind it.
///
/// A service fills in what its token endpoint returns:
///
/// ```swift
/// let model = AuthModel(accessToken: token, account: "billing-client",
///                       expiresAt: Date().addingTimeInterval(3600), refreshToken: refresh)
/// ```
///
/// For an Alipay mini-program, `AuthModel` is the Swift form of the mPaaS `NBIAuthModel`, and
/// the bridge uses the vendor's names for the same fields: ``uid`` (the Alipay user id, which
/// ``userID`` reads) and ``mcUid`` (the host app's own user id, which ``account`` reads):
///
/// ```swift
/// let model = AuthModel(uid: "2088000000000001", accessToken: token, mcUid: "u1",
///                       expiresAt: Date().addingTimeInterval(15 * 24 * 3600))
/// print(model)
/// // AuthModel(uid: 2088000000000001, mcUid: u1, accessToken: <redacted 32 bytes>, ...)
/// ```
///
/// Its `description`, `debugDescription` and reflection (`dump`, `Mirror`) never show the access
/// token or the refresh token, only their lengths, so a model can be logged or interpolated into
/// a message without leaking either credential.
public struct AuthModel: Sendable, Hashable, Codable {
  /// The user id the token server returned, or `""` when it returned none; ``userID`` reads
  /// it as an optional. For the Alipay bridge: the Alipay user id (`user_id`, 16 digits
  /// beginning with 2088 in practice).
  public var uid: String
  /// The access token. Never printed by the library.
  public var accessToken: String
  /// The account the token belongs to; the same value as ``account``. For the Alipay bridge:
  /// the host app's own user id (`extraInfo["mcUid"]` in the SDK's model).
  public var mcUid: String
  /// When the token stops being valid, or `nil` when the server did not say.
  ///
  /// A model without an expiry is valid until the container rejects it (a forced refresh).
  public var expiresAt: Date?
  /// Further string values passed through to the mini-program container.
  public var extraInfo: [String: String] {
    get { rare.extraInfo }
    set { rare = Rare(extraInfo: newValue, refreshToken: rare.refreshToken) }
  }
  /// The refresh token that came with the access token, or `nil` when the server issued none.
  ///
  /// Never printed by the library: descriptions and reflection show only its length.
  public var refreshToken: String? {
    get { rare.refreshToken }
    set { rare = Rare(extraInfo: rare.extraInfo, refreshToken: newValue) }
  }

  /// The fields most models leave empty, behind one reference, so that a model stays as small
  /// as before the refresh token existed (72 bytes): every caller parked on a flight holds one in
  /// its async frames, and 16 more bytes pushed each parked caller into a second 984-byte
  /// task-allocator slab (benchmark B2, heap per parked caller: 2,570 B to 3,594 B).
  var rare: Rare

  final class Rare: Sendable {
    let extraInfo: [String: String]
    let refreshToken: String?

    /// Shared by every model with neither: no allocation for them.
    static let none = Rare(extraInfo: [:], refreshToken: nil)

    init(extraInfo: [String: String], refreshToken: String?) {
      self.extraInfo = extraInfo
      self.refreshToken = refreshToken
    }
  }

  /// Creates a model in the Alipay bridge's vocabulary.
  ///
  /// - Parameters:
  ///   - uid: The Alipay user id.
  ///   - accessToken: The Alipay access token.
  ///   - mcUid: The host app's own user id.
  ///   - expiresAt: When the token expires, if known.
  ///   - extraInfo: Further values for the container.
  ///   - refreshToken: The refresh token, if the server issued one.
  public init(
    uid: String,
    accessToken: String,
    mcUid: String,
    expiresAt: Date? = nil,
    extraInfo: [String: String] = [:],
    refreshToken: String? = nil
  ) {
    self.uid = uid
    self.accessToken = accessToken
    self.mcUid = mcUid
    self.expiresAt = expiresAt
    self.rare =
      extraInfo.isEmpty && refreshToken == nil
      ? .none : Rare(extraInfo: extraInfo, refreshToken: refreshToken)
  }

  /// Creates a model for a service's account.
  ///
  /// - Parameters:
  ///   - accessToken: The access token.
  ///   - account: The account or client id it belongs to: the key's ``AccountKey/account``.
  ///   - userID: The user behind the token, if the server named one.
  ///   - expiresAt: When the token expires, if known.
  ///   - refreshToken: The refresh token, if the server issued one.
  ///   - extraInfo: Further values to keep with the token.
  public init(
    accessToken: String,
    account: String,
    userID: String? = nil,
    expiresAt: Date? = nil,
    refreshToken: String? = nil,
    extraInfo: [String: String] = [:]
  ) {
    self.init(
      uid: userID ?? "", accessToken: accessToken, mcUid: account, expiresAt: expiresAt,
      extraInfo: extraInfo, refreshToken: refreshToken)
  }

  /// The account the token belongs to: the same value as ``mcUid``.
  public var account: String {
    get { mcUid }
    set { mcUid = newValue }
  }

  /// The user behind the token, or `nil` when the server named none (``uid`` is empty).
  public var userID: String? {
    get { uid.isEmpty ? nil : uid }
    set { uid = newValue ?? "" }
  }

  // Equality, hashing and coding over the six fields, as they were synthesized before `rare`.

  /// Whether two models have the same six fields.
  ///
  /// - Parameters:
  ///   - lhs: A model.
  ///   - rhs: Another model.
  /// - Returns: `true` when every field is equal.
  public static func == (lhs: AuthModel, rhs: AuthModel) -> Bool {
    lhs.uid == rhs.uid && lhs.accessToken == rhs.accessToken && lhs.mcUid == rhs.mcUid
      && lhs.expiresAt == rhs.expiresAt && lhs.extraInfo == rhs.extraInfo
      && lhs.refreshToken == rhs.refreshToken
  }

  /// Hashes the six fields that ``==(_:_:)`` compares.
  ///
  /// - Parameter hasher: The hasher to feed.
  public func hash(into hasher: inout Hasher) {
    hasher.combine(uid)
    hasher.combine(accessToken)
    hasher.combine(mcUid)
    hasher.combine(expiresAt)
    hasher.combine(extraInfo)
    hasher.combine(refreshToken)
  }

  private enum CodingKeys: String, CodingKey {
    case uid, accessToken, mcUid, expiresAt, extraInfo, refreshToken
  }

  /// Decodes a model: `expiresAt` and `refreshToken` may be absent, the other keys are required.
  ///
  /// - Parameter decoder: The decoder to read from.
  /// - Throws: `DecodingError` when a required key is missing or a value has the wrong type.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: CodingKeys.self)
    self.init(
      uid: try container.decode(String.self, forKey: .uid),
      accessToken: try container.decode(String.self, forKey: .accessToken),
      mcUid: try container.decode(String.self, forKey: .mcUid),
      expiresAt: try container.decodeIfPresent(Date.self, forKey: .expiresAt),
      extraInfo: try container.decode([String: String].self, forKey: .extraInfo),
      refreshToken: try container.decodeIfPresent(String.self, forKey: .refreshToken))
  }

  /// Encodes the model under the keys `uid`, `accessToken`, `mcUid`, `expiresAt` (when set),
  /// `extraInfo` and `refreshToken` (when set).
  ///
  /// - Parameter encoder: The encoder to write to.
  /// - Throws: What the encoder throws.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(uid, forKey: .uid)
    try container.encode(accessToken, forKey: .accessToken)
    try container.encode(mcUid, forKey: .mcUid)
    try container.encodeIfPresent(expiresAt, forKey: .expiresAt)
    try container.encode(extraInfo, forKey: .extraInfo)
    try container.encodeIfPresent(refreshToken, forKey: .refreshToken)
  }

  /// Whether the model can still be handed out at `date`, given a safety margin.
  ///
  /// A model is valid while ``expiresAt`` is `nil` or later than `date + leeway`.
  ///
  /// - Parameters:
  ///   - date: The current wall-clock time.
  ///   - leeway: How long before the expiry the model already counts as expired.
  /// - Returns: `true` when the token may be served.
  @inlinable
  public func isValid(at date: Date, leeway: TimeInterval = 0) -> Bool {
    guard let expiresAt else { return true }
    return expiresAt.timeIntervalSince(date) > leeway
  }

  /// The access token's length and a short fingerprint safe to log, never the token itself.
  public var redactedToken: String {
    "<redacted \(accessToken.utf8.count) bytes>"
  }

  /// The refresh token's length in the same form as ``redactedToken``, or `nil` without one.
  var redactedRefreshToken: String? {
    refreshToken.map { "<redacted \($0.utf8.count) bytes>" }
  }
}

extension AuthModel: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
  /// A summary that shows everything but the tokens, which appear only as their lengths.
  public var description: String {
    var parts = ["uid: \(uid)", "mcUid: \(mcUid)", "accessToken: \(redactedToken)"]
    if let redactedRefreshToken { parts.append("refreshToken: \(redactedRefreshToken)") }
    if let expiresAt { parts.append("expiresAt: \(expiresAt)") }
    if !extraInfo.isEmpty { parts.append("extraInfo: \(extraInfo.keys.sorted())") }
    return "AuthModel(\(parts.joined(separator: ", ")))"
  }

  /// The same as ``description``: the tokens are redacted in debug output too.
  public var debugDescription: String { description }

  /// A reflection that replaces both tokens, so `dump(model)` does not reveal them.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "uid": uid, "accessToken": redactedToken, "mcUid": mcUid,
        "expiresAt": expiresAt as Any, "extraInfo": extraInfo,
        "refreshToken": redactedRefreshToken as Any,
      ],
      displayStyle: .struct
    )
  }
}
