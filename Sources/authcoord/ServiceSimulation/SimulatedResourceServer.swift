import Foundation

/// A SIMULATION of the API the service calls with its bearer token, in process (no network),
/// for `authcoord simulate --service`.
///
/// It answers 200 for an access token the ``SimulatedTokenServer`` says is active and 401 for a
/// revoked, unknown or expired one, at once (no latency is modelled). An operator can revoke
/// every access token issued so far (a key rotation, an incident): refresh tokens stay valid,
/// so a client recovers with one refresh.
final class SimulatedResourceServer: @unchecked Sendable {
  /// The server's counters.
  struct Counters: Sendable, Equatable {
    var ok = 0
    var unauthorized = 0
    var revocations = 0
  }

  let tokenServer: SimulatedTokenServer
  private let lock = NSLock()
  // Guarded by `lock`.
  private var counters = Counters()

  init(tokenServer: SimulatedTokenServer) {
    self.tokenServer = tokenServer
  }

  var snapshot: Counters { lock.withLock { counters } }

  /// `GET /reports` with `Authorization: Bearer <accessToken>`: the HTTP status.
  func call(bearer accessToken: String) async -> Int {
    let active = tokenServer.status(of: accessToken) == .active
    return lock.withLock {
      if active {
        counters.ok += 1
        return 200
      }
      counters.unauthorized += 1
      return 401
    }
  }

  /// Revokes every access token issued so far (refresh tokens stay valid).
  ///
  /// - Returns: How many active access tokens were revoked.
  @discardableResult func revokeAllAccessTokens() -> Int {
    lock.withLock { counters.revocations += 1 }
    return tokenServer.revokeAccessTokens()
  }
}
