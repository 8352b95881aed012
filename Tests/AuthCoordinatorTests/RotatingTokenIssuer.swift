import AuthCoordinator
import Foundation
import SyncPrimitives

/// SIMULATED TOKEN SERVER, in memory: issues access and refresh tokens and rotates the refresh
/// token on every use, as servers with refresh-token rotation do. Reusing a spent refresh token
/// revokes its whole family (every later refresh of it fails with `invalid_grant`), and is
/// counted: the tests assert it never happens. The multi-process tests use a real HTTP server
/// with the same rules.
final class RotatingTokenIssuer: Sendable {
  struct InvalidGrant: Error, Equatable {}

  private struct State {
    var next = 0
    /// Refresh token → (family, spent).
    var refreshTokens: [String: (family: Int, spent: Bool)] = [:]
    var revokedFamilies: Set<Int> = []
    var reuses = 0
    var grants = 0
  }

  private let state = LockedState(State())
  let lifetime: TimeInterval

  init(lifetime: TimeInterval = 3600) { self.lifetime = lifetime }

  /// Starts a family: what a first login returns.
  func login(mcUid: String, at date: Date) -> AuthModel {
    state.withLock { state in
      state.next += 1
      state.grants += 1
      return issue(family: state.next, &state, mcUid: mcUid, at: date)
    }
  }

  /// The refresh-token grant.
  func refresh(_ refreshToken: String?, mcUid: String, at date: Date) throws -> AuthModel {
    try state.withLock { state in
      guard let refreshToken, let entry = state.refreshTokens[refreshToken],
        !state.revokedFamilies.contains(entry.family)
      else { throw InvalidGrant() }
      if entry.spent {
        state.reuses += 1
        state.revokedFamilies.insert(entry.family)
        throw InvalidGrant()
      }
      state.refreshTokens[refreshToken]?.spent = true
      state.grants += 1
      return issue(family: entry.family, &state, mcUid: mcUid, at: date)
    }
  }

  var reuses: Int { state.withLock { $0.reuses } }
  var revokedFamilies: Int { state.withLock { $0.revokedFamilies.count } }
  var grants: Int { state.withLock { $0.grants } }

  private func issue(family: Int, _ state: inout State, mcUid: String, at date: Date) -> AuthModel {
    state.next += 1
    let refreshToken = "rt-\(family)-\(state.next)"
    state.refreshTokens[refreshToken] = (family, false)
    return AuthModel(
      uid: "2088000000000001", accessToken: "at-\(family)-\(state.next)", mcUid: mcUid,
      expiresAt: date.addingTimeInterval(lifetime), refreshToken: refreshToken)
  }
}
