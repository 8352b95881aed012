import Foundation

/// A SIMULATION of an OAuth 2 token server, in process (no network): the token endpoint the
/// service's authorizer calls in `authcoord simulate --service`. Only the server is simulated;
/// the coordinator in front of it is the real one.
///
/// It models what matters to a client that shares one token among many callers:
///
/// - `client_credentials` starts a new token *family* (an access token and a refresh token);
/// - `refresh_token` ROTATES: each refresh token may be used once and is replaced by a new one
///   of the same family. Presenting a spent one again is a reuse: the server revokes the whole
///   family (its access tokens and its refresh tokens), counts the reuse and answers
///   `invalid_grant`, as OAuth 2 security best practice has servers do;
/// - a response delay on the demo's virtual clock, which can be changed while it runs (a slow
///   endpoint). A grant takes effect when the request arrives (a refresh token is spent then)
///   and the answer comes after the delay;
/// - counters: token requests, grants by kind, reuses, `invalid_grant` answers.
///
/// The resource server (``SimulatedResourceServer``) asks it whether an access token is active.
/// Tokens are opaque strings that the demo never prints.
final class SimulatedTokenServer: @unchecked Sendable {
  /// What the client asks for.
  enum Grant: Sendable {
    case clientCredentials(clientID: String)
    case refreshToken(String)
  }

  /// A successful answer.
  struct Reply: Sendable {
    let accessToken: String
    let refreshToken: String
    let expiresAt: Date
  }

  /// `invalid_grant`: the refresh token is unknown, spent (a reuse) or of a revoked family.
  struct InvalidGrant: Error, CustomStringConvertible {
    let reason: String
    var description: String { "invalid_grant (\(reason))" }
  }

  /// The server's counters.
  struct Counters: Sendable, Equatable {
    var tokenRequests = 0
    var clientCredentialsGrants = 0
    var refreshTokenGrants = 0
    var reuses = 0
    var invalidGrants = 0
    var familiesRevoked = 0
  }

  /// Whether an access token may be used.
  enum TokenStatus: Sendable {
    case active, expired, revoked, unknown
  }

  private struct AccessRecord {
    let family: Int
    let expiresAt: Date
    var revoked = false
  }

  private struct RefreshRecord {
    let family: Int
    var spent = false
  }

  let clock: VirtualClock
  let tokenLifetime: TimeInterval
  /// The demo's wall-clock date (it moves with the virtual clock).
  let date: @Sendable () -> Date
  /// Where the server's lines go (the timeline's detail lines).
  let log: @Sendable (String) -> Void

  private let lock = NSLock()
  // Guarded by `lock`.
  private var delay: Duration
  private var counters = Counters()
  private var accessTokens: [String: AccessRecord] = [:]
  private var refreshTokens: [String: RefreshRecord] = [:]
  private var revokedFamilies: Set<Int> = []
  private var families = 0
  private var issued = 0

  init(
    clock: VirtualClock, responseDelay: Duration, tokenLifetime: Duration,
    date: @escaping @Sendable () -> Date, log: @escaping @Sendable (String) -> Void
  ) {
    self.clock = clock
    self.delay = responseDelay
    self.tokenLifetime = tokenLifetime.seconds
    self.date = date
    self.log = log
  }

  /// How long the server takes to answer a token request.
  var responseDelay: Duration {
    get { lock.withLock { delay } }
    set { lock.withLock { delay = newValue } }
  }

  var snapshot: Counters { lock.withLock { counters } }

  /// The token endpoint: takes effect on arrival, answers after the response delay.
  func token(_ grant: Grant) async throws -> Reply {
    let (outcome, delay, number) = lock.withLock {
      counters.tokenRequests += 1
      return (process(grant), self.delay, counters.tokenRequests)
    }
    try? await clock.sleep(for: delay)
    switch outcome {
    case .success(let (reply, kind, family)):
      log("token server: \(kind) grant (token request #\(number)): \(family)")
      return reply
    case .failure(let error):
      log("token server: token request #\(number) refused: \(error)")
      throw error
    }
  }

  /// Applies a grant (under the lock).
  private func process(
    _ grant: Grant
  ) -> Result<(Reply, String, String), InvalidGrant> {
    switch grant {
    case .clientCredentials:
      counters.clientCredentialsGrants += 1
      families += 1
      return .success(
        (issue(family: families), "client_credentials", "new token family #\(families)"))
    case .refreshToken(let token):
      guard var record = refreshTokens[token] else {
        counters.invalidGrants += 1
        return .failure(InvalidGrant(reason: "unknown refresh token"))
      }
      guard !revokedFamilies.contains(record.family) else {
        counters.invalidGrants += 1
        return .failure(InvalidGrant(reason: "token family #\(record.family) is revoked"))
      }
      guard !record.spent else {
        // A reuse: someone holds a copy of a spent token. Revoke the whole family.
        counters.reuses += 1
        counters.invalidGrants += 1
        counters.familiesRevoked += 1
        revokedFamilies.insert(record.family)
        for (key, access) in accessTokens where access.family == record.family {
          accessTokens[key]?.revoked = true
        }
        return .failure(
          InvalidGrant(reason: "refresh token reused: token family #\(record.family) revoked"))
      }
      record.spent = true
      refreshTokens[token] = record
      counters.refreshTokenGrants += 1
      return .success(
        (
          issue(family: record.family), "refresh_token",
          "rotated (family #\(record.family); the old refresh token is spent)"
        ))
    }
  }

  /// Issues a new access token and refresh token of `family` (under the lock).
  private func issue(family: Int) -> Reply {
    issued += 1
    let expiresAt = date().addingTimeInterval(tokenLifetime)
    let access = "simulated-access-\(family)-\(issued)"
    let refresh = "simulated-refresh-\(family)-\(issued)"
    accessTokens[access] = AccessRecord(family: family, expiresAt: expiresAt)
    refreshTokens[refresh] = RefreshRecord(family: family)
    return Reply(accessToken: access, refreshToken: refresh, expiresAt: expiresAt)
  }

  /// Whether `accessToken` is active now (the resource server's introspection).
  func status(of accessToken: String) -> TokenStatus {
    let now = date()
    return lock.withLock {
      guard let record = accessTokens[accessToken] else { return .unknown }
      if record.revoked { return .revoked }
      return now < record.expiresAt ? .active : .expired
    }
  }

  /// Revokes every access token issued so far; refresh tokens stay valid.
  ///
  /// - Returns: How many active access tokens were revoked.
  @discardableResult func revokeAccessTokens() -> Int {
    let now = date()
    return lock.withLock {
      var count = 0
      for (key, record) in accessTokens where !record.revoked {
        if now < record.expiresAt { count += 1 }
        accessTokens[key]?.revoked = true
      }
      return count
    }
  }
}
