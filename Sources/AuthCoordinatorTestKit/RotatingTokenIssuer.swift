import Foundation

/// The SIMULATED rotation rules every simulated token server in this package shares: the
/// TestKit's ``SimulatedTokenServer`` and ``SimulatedAlipayGateway``, the fleet simulation
/// (through ``SimulatedTokenServer``), the tests' in-memory issuers and the PostgreSQL fleet
/// demo's identity provider. A value: whoever holds it keeps it behind its own lock (or, across
/// processes, in a file under `flock(2)`; it is `Codable`).
///
/// - A *family* starts with a grant that needs no refresh token (a login, client credentials,
///   an auth code, a token exchange). Each grant issues an access token and a refresh token.
/// - A refresh ROTATES: the refresh token is spent and replaced by a new one of the same
///   family. Presenting a spent refresh token again is a *reuse*: the whole family is revoked
///   (its access and refresh tokens), as OAuth 2 security best practice has servers do
///   (RFC 9700 §4.14.2). A refresh token of a revoked family, an unknown one, or one whose
///   family outlived its lifetime is refused.
/// - Revocation (RFC 7009): a refresh token revokes its family; an access token, itself alone.
///
/// Tokens are opaque strings `<prefix>-<family>-<serial>`; the serial counts every token pair
/// the issuer made.
public struct RotatingTokenIssuer: Sendable, Codable, Equatable {
  /// One grant's tokens.
  public struct Issued: Sendable, Equatable {
    /// The access token.
    public var accessToken: String
    /// The refresh token.
    public var refreshToken: String
    /// The family both belong to.
    public var family: Int
    /// The pair's number among all the issuer made, from 1.
    public var serial: Int
    /// When the access token expires.
    public var expiresAt: Date
    /// When the family ends (its refresh tokens are refused from then on), if it does.
    public var familyEndsAt: Date?
  }

  /// Why a refresh token was refused; every case is `invalid_grant` at an OAuth 2 server.
  public enum Refusal: Error, Sendable, Equatable, CustomStringConvertible {
    /// Never issued here.
    case unknown
    /// Its family was revoked (a reuse, or a revocation).
    case revoked(family: Int)
    /// Spent before: the family is revoked now.
    case reused(family: Int)
    /// Its family outlived its lifetime.
    case familyEnded(family: Int)

    /// What an `invalid_grant` answer's description says.
    public var description: String {
      switch self {
      case .unknown: return "unknown refresh token"
      case .revoked(let family): return "token family #\(family) is revoked"
      case .reused(let family): return "refresh token reused: token family #\(family) revoked"
      case .familyEnded(let family): return "token family #\(family) has ended"
      }
    }
  }

  /// Whether an access token may be used.
  public enum AccessStatus: Sendable, Equatable {
    /// Issued, not expired, not revoked.
    case active
    /// Past its expiry.
    case expired
    /// Revoked.
    case revoked
    /// Never issued here.
    case unknown
  }

  /// What the issuer counted.
  public struct Counters: Sendable, Codable, Equatable {
    /// Families started.
    public var families = 0
    /// Refreshes granted (rotations).
    public var rotations = 0
    /// Spent refresh tokens presented again.
    public var reuses = 0
    /// Families revoked because of a reuse (a revocation is not counted).
    public var familiesRevoked = 0
    /// Refreshes refused, reuses included.
    public var refusals = 0
  }

  struct AccessRecord: Codable, Equatable {
    var family: Int
    var expiresAt: Date
    var revoked = false
  }

  struct RefreshRecord: Codable, Equatable {
    var family: Int
    var spent = false
    /// The refresh token issued in its place.
    var successor: String?
  }

  struct FamilyRecord: Codable, Equatable {
    var endsAt: Date?
    var revoked = false
    /// Its newest refresh token.
    var current: String
  }

  /// The prefix of access tokens (`<prefix>-<family>-<serial>`).
  public let accessTokenPrefix: String
  /// The prefix of refresh tokens.
  public let refreshTokenPrefix: String
  /// Whether a rotation revokes the family's earlier access tokens (Alipay's gateway does;
  /// most OAuth 2 servers let them expire).
  public let rotationRevokesAccessTokens: Bool
  /// What the issuer counted.
  public private(set) var counters = Counters()
  /// The number of token pairs issued.
  public private(set) var serial = 0
  var accessTokens: [String: AccessRecord] = [:]
  var refreshTokens: [String: RefreshRecord] = [:]
  var families: [Int: FamilyRecord] = [:]

  /// Creates an issuer that has issued nothing.
  ///
  /// - Parameters:
  ///   - accessTokenPrefix: The access tokens' prefix; `simulated-access` by default.
  ///   - refreshTokenPrefix: The refresh tokens' prefix; `simulated-refresh` by default.
  ///   - rotationRevokesAccessTokens: Whether a rotation revokes the family's earlier access
  ///     tokens; `false` by default.
  public init(
    accessTokenPrefix: String = "simulated-access",
    refreshTokenPrefix: String = "simulated-refresh",
    rotationRevokesAccessTokens: Bool = false
  ) {
    self.accessTokenPrefix = accessTokenPrefix
    self.refreshTokenPrefix = refreshTokenPrefix
    self.rotationRevokesAccessTokens = rotationRevokesAccessTokens
  }

  /// Starts a family: a grant that spends no refresh token.
  ///
  /// - Parameters:
  ///   - date: Now.
  ///   - lifetime: How long its access token lives.
  ///   - familyLifetime: How long the family lives; `nil` (the default) for ever.
  /// - Returns: The family's first tokens.
  public mutating func startFamily(
    at date: Date, lifetime: Duration, familyLifetime: Duration? = nil
  ) -> Issued {
    counters.families += 1
    let family = counters.families
    families[family] = FamilyRecord(
      endsAt: familyLifetime.map { date.addingTimeInterval($0.seconds) }, current: "")
    return issue(family: family, at: date, lifetime: lifetime)
  }

  /// The refresh-token grant: spends `refreshToken` and issues its family's next tokens.
  ///
  /// - Parameters:
  ///   - refreshToken: The refresh token presented.
  ///   - date: Now.
  ///   - lifetime: How long the new access token lives.
  /// - Returns: The new tokens, or why the refresh token was refused.
  public mutating func rotate(
    _ refreshToken: String, at date: Date, lifetime: Duration
  ) -> Result<Issued, Refusal> {
    guard let record = refreshTokens[refreshToken], let family = families[record.family] else {
      counters.refusals += 1
      return .failure(.unknown)
    }
    guard !family.revoked else {
      counters.refusals += 1
      return .failure(.revoked(family: record.family))
    }
    guard !record.spent else {
      // A reuse: someone holds a copy of a spent token. Revoke the whole family.
      counters.reuses += 1
      counters.refusals += 1
      counters.familiesRevoked += 1
      revoke(family: record.family)
      return .failure(.reused(family: record.family))
    }
    if let endsAt = family.endsAt, endsAt <= date {
      counters.refusals += 1
      return .failure(.familyEnded(family: record.family))
    }
    if rotationRevokesAccessTokens {
      for (token, access) in accessTokens where access.family == record.family {
        accessTokens[token]?.revoked = true
      }
    }
    let issued = issue(family: record.family, at: date, lifetime: lifetime)
    refreshTokens[refreshToken]?.spent = true
    refreshTokens[refreshToken]?.successor = issued.refreshToken
    counters.rotations += 1
    return .success(issued)
  }

  /// Revokes `token` (RFC 7009): a refresh token's whole family, or an access token alone.
  ///
  /// - Parameter token: A token this issuer issued; any other changes nothing.
  /// - Returns: Whether the issuer knew the token.
  @discardableResult
  public mutating func revoke(_ token: String) -> Bool {
    if let family = refreshTokens[token]?.family {
      revoke(family: family)
      return true
    }
    guard accessTokens[token] != nil else { return false }
    accessTokens[token]?.revoked = true
    return true
  }

  /// Revokes every access token issued so far (a resource server's key rotation); refresh
  /// tokens stay valid.
  ///
  /// - Parameter date: Now.
  /// - Returns: How many of them were active at `date`.
  @discardableResult
  public mutating func revokeAllAccessTokens(at date: Date) -> Int {
    var active = 0
    for (token, record) in accessTokens where !record.revoked {
      if status(ofAccessToken: token, at: date) == .active { active += 1 }
      accessTokens[token]?.revoked = true
    }
    return active
  }

  /// Whether `accessToken` may be used at `date`.
  ///
  /// - Parameters:
  ///   - accessToken: An access token.
  ///   - date: Now.
  /// - Returns: Its status.
  public func status(ofAccessToken accessToken: String, at date: Date) -> AccessStatus {
    guard let record = accessTokens[accessToken] else { return .unknown }
    if record.revoked || families[record.family]?.revoked == true { return .revoked }
    return date < record.expiresAt ? .active : .expired
  }

  /// When `accessToken` expires, if it was issued here.
  ///
  /// - Parameter accessToken: An access token.
  /// - Returns: Its expiry, or `nil` for a token never issued here.
  public func expiry(ofAccessToken accessToken: String) -> Date? {
    accessTokens[accessToken]?.expiresAt
  }

  /// Whether `token` is live at `date`: an active access token, or a refresh token not yet
  /// spent of a family that is neither revoked nor ended (what a token exchange accepts as its
  /// subject).
  ///
  /// - Parameters:
  ///   - token: An access or refresh token.
  ///   - date: Now.
  /// - Returns: Whether it is live.
  public func isLive(_ token: String, at date: Date) -> Bool {
    if accessTokens[token] != nil { return status(ofAccessToken: token, at: date) == .active }
    guard let record = refreshTokens[token], !record.spent,
      let family = families[record.family], !family.revoked
    else { return false }
    return family.endsAt.map { date < $0 } ?? true
  }

  /// The family of a token this issuer issued.
  ///
  /// - Parameter token: An access or refresh token.
  /// - Returns: Its family, or `nil` for a token never issued here.
  public func family(of token: String) -> Int? {
    refreshTokens[token]?.family ?? accessTokens[token]?.family
  }

  /// Whether `family` was revoked.
  ///
  /// - Parameter family: A family.
  /// - Returns: `true` once a reuse or a revocation revoked it.
  public func isRevoked(family: Int) -> Bool { families[family]?.revoked ?? false }

  /// The newest refresh token of `family`.
  ///
  /// - Parameter family: A family.
  /// - Returns: Its newest refresh token, or `nil` for a family never started here.
  public func currentRefreshToken(ofFamily family: Int) -> String? {
    families[family]?.current
  }

  /// The refresh token issued in place of `refreshToken`, if it was spent.
  ///
  /// - Parameter refreshToken: A refresh token.
  /// - Returns: Its successor, or `nil` while it is unspent.
  public func successor(of refreshToken: String) -> String? {
    refreshTokens[refreshToken]?.successor
  }

  /// Revokes `family`: its refresh tokens are refused and its access tokens revoked (a user
  /// cancelling the authorization).
  ///
  /// - Parameter family: A family this issuer started; any other changes nothing.
  public mutating func revoke(family: Int) {
    guard families[family] != nil else { return }
    families[family]?.revoked = true
    for (token, access) in accessTokens where access.family == family {
      accessTokens[token]?.revoked = true
    }
  }

  private mutating func issue(family: Int, at date: Date, lifetime: Duration) -> Issued {
    serial += 1
    let access = "\(accessTokenPrefix)-\(family)-\(serial)"
    let refresh = "\(refreshTokenPrefix)-\(family)-\(serial)"
    let expiresAt = date.addingTimeInterval(lifetime.seconds)
    accessTokens[access] = AccessRecord(family: family, expiresAt: expiresAt)
    refreshTokens[refresh] = RefreshRecord(family: family)
    families[family]?.current = refresh
    return Issued(
      accessToken: access, refreshToken: refresh, family: family, serial: serial,
      expiresAt: expiresAt, familyEndsAt: families[family]?.endsAt)
  }
}

extension Duration {
  /// The duration in seconds, fractions included.
  fileprivate var seconds: TimeInterval {
    TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
  }
}
