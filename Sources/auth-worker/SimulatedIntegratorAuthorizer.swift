import AuthCoordinator
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif
#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// What this process's authorizer did.
struct AuthorizerCounts: Sendable {
  var started = 0
  var succeeded = 0
  var failed = 0
  var refreshGrants = 0
  var newFamilies = 0
}

/// Why the simulated integrator server refused a grant.
struct GrantRefused: Error, CustomStringConvertible {
  let status: Int
  let error: String
  var description: String { "HTTP \(status) \(error)" }
}

/// SIMULATED INTEGRATOR SERVER client: the authorizer a service would write over its own token
/// endpoint, here over the tests' rotating token server. It does a refresh-token grant when the
/// model being replaced holds a refresh token, and starts a new token family
/// (`client_credentials`, standing in for an interactive login) otherwise. It never falls back
/// from a refused refresh to a new login: a refused refresh (a reused token) must show. With
/// `loginAfterRefusal`, a refresh refused with `invalid_grant` throws an `AuthCoordinatorError`
/// with `refusesRefreshToken` set, as `OAuth2Authorizer` does: the coordinator drops that refresh
/// token, and its next authorization is a login (a new family). With `traceGrants`, it prints
/// `grant <monotonicSeconds()> <refresh token>` as it begins each refresh-token grant, and
/// `answer <monotonicSeconds()> <spent> <new refresh token>` or `refused <monotonicSeconds()>
/// <spent> <why>` as it ends.
struct SimulatedIntegratorAuthorizer: Authorizer {
  let endpoint: URL
  let session: URLSession
  let counts: Locked<AuthorizerCounts>
  var loginAfterRefusal = false
  var traceGrants = false

  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    var form = ["grant_type": "client_credentials"]
    if let refreshToken = request.replacing?.refreshToken {
      form = ["grant_type": "refresh_token", "refresh_token": refreshToken]
      if traceGrants { emit("grant \(monotonicSeconds()) \(refreshToken)") }
    }
    counts.withLock {
      $0.started += 1
      if form["grant_type"] == "refresh_token" {
        $0.refreshGrants += 1
      } else {
        $0.newFamilies += 1
      }
    }
    let spent = form["refresh_token"]
    do {
      let model = try await grant(form, for: request.key)
      counts.withLock { $0.succeeded += 1 }
      if traceGrants, let spent {
        emit("answer \(monotonicSeconds()) \(spent) \(model.refreshToken ?? "-")")
      }
      return model
    } catch let refused as GrantRefused
      where loginAfterRefusal && form["grant_type"] == "refresh_token"
      && refused.error == "invalid_grant"
    {
      counts.withLock { $0.failed += 1 }
      if traceGrants { emit("refused \(monotonicSeconds()) \(spent ?? "-") \(refused)") }
      var error = AuthCoordinatorError(
        .authorizationFailed, "the server refused the refresh token", underlying: refused)
      error.refusesRefreshToken = true
      throw error
    } catch {
      counts.withLock { $0.failed += 1 }
      if traceGrants, let spent { emit("refused \(monotonicSeconds()) \(spent) \(error)") }
      throw error
    }
  }

  private func grant(_ form: [String: String], for key: AccountKey) async throws -> AuthModel {
    var request = URLRequest(url: endpoint.appendingPathComponent("token"))
    request.httpMethod = "POST"
    request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
    // Test-only: lets the test find (and SIGKILL) the process whose request the server holds.
    request.setValue(String(getpid()), forHTTPHeaderField: "X-Worker-Pid")
    request.httpBody = Data(
      form.map { name, value in
        "\(name)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
      }.sorted().joined(separator: "&").utf8)
    let (data, response) = try await session.data(for: request)
    let status = (response as? HTTPURLResponse)?.statusCode ?? 0
    let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    guard status == 200, let accessToken = object["access_token"] as? String else {
      throw GrantRefused(status: status, error: object["error"] as? String ?? "no access_token")
    }
    let expiresIn = (object["expires_in"] as? NSNumber)?.doubleValue
    return AuthModel(
      uid: object["user_id"] as? String ?? "2088000000000000",
      accessToken: accessToken,
      mcUid: key.account,
      expiresAt: expiresIn.map { Date().addingTimeInterval($0) },
      refreshToken: object["refresh_token"] as? String)
  }
}
