import AuthCoordinator
import Foundation
import SyncPrimitives

/// SIMULATED TOKEN SERVER for ``SharedLeaseLogoutWindowTests``, in memory. The rules of
/// `Tests/AuthCoordinatorTests/RotatingTokenIssuer.swift` (a copy, so that the two test targets
/// stay independent): every refresh rotates the refresh token; reusing a spent one revokes its
/// whole family (later refreshes of it fail) and is recorded.
///
/// It also numbers every model it issues (issue order, in the access token
/// `at|<mcUid>|<family>|<seq>`), remembers when each family began (its login's number) and which
/// refresh token of each family is the current one, so that the driver can check what it is
/// served and what the store holds at the end.
final class SharedLeaseIssuer: Sendable {
  struct InvalidGrant: Error, Equatable {}

  /// A refresh token presented a second time.
  struct Reuse: Sendable, CustomStringConvertible {
    let family: Int
    let token: String
    let firstSpentBy: String
    let reusedBy: String
    var description: String {
      "refresh token \(token) of family \(family) spent by \(firstSpentBy), presented again by "
        + "\(reusedBy)"
    }
  }

  private struct Token {
    var family: Int
    var spentBy: String?
  }

  private struct State {
    var seq: UInt64 = 0
    var nextFamily = 0
    var tokens: [String: Token] = [:]
    var current: [Int: String] = [:]
    var familyBorn: [Int: UInt64] = [:]
    var revoked: Set<Int> = []
    var reuses: [Reuse] = []
    /// Each spent refresh token → the one issued in its place.
    var successor: [String: String] = [:]
    var logins = 0
    var refreshes = 0
    var invalidGrants = 0
    var unavailable = 0
  }

  private let state = LockedState(State())

  /// Starts a family: what a login returns.
  func login(mcUid: String, lifetime: TimeInterval, by caller: String) -> AuthModel {
    state.withLock { state in
      state.nextFamily += 1
      state.logins += 1
      let family = state.nextFamily
      state.familyBorn[family] = state.seq + 1
      return Self.issue(family: family, &state, mcUid: mcUid, lifetime: lifetime)
    }
  }

  /// The refresh-token grant.
  func refresh(
    _ refreshToken: String, mcUid: String, lifetime: TimeInterval, by caller: String
  ) throws -> AuthModel {
    try state.withLock { state in
      guard let token = state.tokens[refreshToken], !state.revoked.contains(token.family) else {
        state.invalidGrants += 1
        throw InvalidGrant()
      }
      if let first = token.spentBy {
        state.invalidGrants += 1
        state.reuses.append(
          Reuse(family: token.family, token: refreshToken, firstSpentBy: first, reusedBy: caller))
        state.revoked.insert(token.family)
        throw InvalidGrant()
      }
      state.tokens[refreshToken]?.spentBy = caller
      state.refreshes += 1
      let model = Self.issue(family: token.family, &state, mcUid: mcUid, lifetime: lifetime)
      state.successor[refreshToken] = model.refreshToken
      return model
    }
  }

  /// The server answers 503 with `Retry-After`: nothing is spent or issued.
  func answerUnavailable() { state.withLock { $0.unavailable += 1 } }

  /// Whether `family` was revoked (a refresh token of it was presented twice).
  func isRevoked(_ family: Int) -> Bool { state.withLock { $0.revoked.contains(family) } }

  /// The reuse `caller` made, if its refresh presented a spent token.
  func reuse(by caller: String) -> Reuse? {
    state.withLock { $0.reuses.first { $0.reusedBy == caller } }
  }

  /// Token requests that reached the server: logins, refreshes (granted or not), 503s.
  var requests: Int {
    state.withLock { $0.logins + $0.refreshes + $0.invalidGrants + $0.unavailable }
  }

  /// The 503 answers.
  var unavailableAnswers: Int { state.withLock { $0.unavailable } }

  /// The number of the last model issued.
  var issued: UInt64 { state.withLock { $0.seq } }
  var reuses: [Reuse] { state.withLock { $0.reuses } }
  var revokedFamilies: Int { state.withLock { $0.revoked.count } }
  var counts: (logins: Int, refreshes: Int, invalidGrants: Int) {
    state.withLock { ($0.logins, $0.refreshes, $0.invalidGrants) }
  }

  /// The refresh tokens issued, one after the other, in place of `token` (its rotation, that
  /// one's, and so on).
  func descendants(of token: String) -> [String] {
    state.withLock { state in
      var chain: [String] = []
      var next = state.successor[token]
      while let current = next, chain.count < 10_000 {
        chain.append(current)
        next = state.successor[current]
      }
      return chain
    }
  }

  /// The family of a refresh token this issuer issued.
  func family(ofRefreshToken token: String) -> Int? {
    state.withLock { $0.tokens[token]?.family }
  }

  /// The number of the login that began `family`.
  func born(_ family: Int) -> UInt64? { state.withLock { $0.familyBorn[family] } }

  /// Nil when `refreshToken` is its family's current token and the family is not revoked;
  /// otherwise why not.
  func problem(withStored refreshToken: String?) -> String? {
    state.withLock { state in
      guard let refreshToken, let token = state.tokens[refreshToken] else {
        return "holds \(refreshToken ?? "no refresh token"), which this issuer never issued"
      }
      if state.revoked.contains(token.family) {
        return "holds \(refreshToken) of family \(token.family), which is revoked"
      }
      if state.current[token.family] != refreshToken {
        return "holds \(refreshToken) of family \(token.family), whose current token is "
          + "\(state.current[token.family] ?? "none")"
      }
      return nil
    }
  }

  /// (number, family) from a model's access token.
  static func parse(_ model: AuthModel) -> (seq: UInt64, family: Int)? {
    let parts = model.accessToken.split(separator: "|")
    guard parts.count == 4, parts[0] == "at", parts[1] == model.mcUid,
      let family = Int(parts[2]), let seq = UInt64(parts[3])
    else { return nil }
    return (seq, family)
  }

  private static func issue(
    family: Int, _ state: inout State, mcUid: String, lifetime: TimeInterval
  ) -> AuthModel {
    state.seq += 1
    let refreshToken = "rt|\(family)|\(state.seq)"
    state.tokens[refreshToken] = Token(family: family)
    state.current[family] = refreshToken
    return AuthModel(
      uid: "2088000000000001", accessToken: "at|\(mcUid)|\(family)|\(state.seq)", mcUid: mcUid,
      expiresAt: Date().addingTimeInterval(lifetime), refreshToken: refreshToken)
  }
}
