import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// SIMULATED TOKEN SERVER, in memory: the TestKit's ``RotatingTokenIssuer`` (the rotation rules
/// every simulated server here shares) behind a lock, issuing models. Every refresh rotates the
/// refresh token; reusing a spent one revokes its whole family (every later refresh of it fails
/// with `invalid_grant`) and is counted: the tests assert it never happens. The multi-process
/// tests use a real HTTP server with the same rules.
final class TestTokenIssuer: Sendable {
  struct InvalidGrant: Error, Equatable {}

  private let issuer = LockedState(
    RotatingTokenIssuer(accessTokenPrefix: "at", refreshTokenPrefix: "rt"))
  let lifetime: TimeInterval

  init(lifetime: TimeInterval = 3600) { self.lifetime = lifetime }

  /// Starts a family: what a first login returns.
  func login(mcUid: String, at date: Date) -> AuthModel {
    let issued = issuer.withLock { $0.startFamily(at: date, lifetime: .seconds(lifetime)) }
    return model(issued, mcUid: mcUid)
  }

  /// The refresh-token grant.
  func refresh(_ refreshToken: String?, mcUid: String, at date: Date) throws -> AuthModel {
    let rotation = issuer.withLock {
      $0.rotate(refreshToken ?? "", at: date, lifetime: .seconds(lifetime))
    }
    guard case .success(let issued) = rotation else { throw InvalidGrant() }
    return model(issued, mcUid: mcUid)
  }

  var reuses: Int { issuer.withLock { $0.counters.reuses } }

  private func model(_ issued: RotatingTokenIssuer.Issued, mcUid: String) -> AuthModel {
    AuthModel(
      uid: "2088000000000001", accessToken: issued.accessToken, mcUid: mcUid,
      expiresAt: issued.expiresAt, refreshToken: issued.refreshToken)
  }
}
