import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A SIMULATED identity provider shared by the demo's replica processes: the TestKit's
/// ``RotatingTokenIssuer`` (the rotation rules every simulated server here shares) in a JSON
/// state file in the run's directory, changed under `flock(2)`. Every refresh rotates the
/// refresh token; a spent one presented again is a reuse and revokes the family, after which
/// every refresh of it fails. It counts the authorizations it completed and records every
/// refresh token spent. It stands in for the integrator's token endpoint, which the demo does
/// not have.
struct SimulatedIdentityProvider: Sendable {
  struct State: Codable {
    var issuer = RotatingTokenIssuer(accessTokenPrefix: "AT", refreshTokenPrefix: "RT")
    /// Authorizations completed.
    var issued = 0
    var spent: [String] = []
    /// Seconds since the run's start at which each authorization began and ended.
    var started: [Double] = []
    var finished: [Double] = []

    var reuses: Int { issuer.counters.reuses }
    var revokedFamilies: Int { issuer.counters.familiesRevoked }
  }

  let directory: URL
  let replica: Int
  let delay: Duration
  /// How long an issued access token lives, in seconds.
  let lifetime: TimeInterval
  let epoch: Date

  private var stateURL: URL { directory.appending(path: "idp.json") }

  /// Starts the run's state: one family, whose first model (expired a minute ago, for
  /// `account`) every replica finds in the store.
  static func reset(in directory: URL, account: String) throws -> AuthModel {
    var state = State()
    let issued = state.issuer.startFamily(at: Date(), lifetime: .seconds(-60))
    try JSONEncoder().encode(state).write(to: directory.appending(path: "idp.json"))
    return model(issued, account: account)
  }

  static func read(in directory: URL) throws -> State {
    try JSONDecoder().decode(
      State.self, from: Data(contentsOf: directory.appending(path: "idp.json")))
  }

  /// The replica's authorizer: marks that this replica is authorizing (the parent's
  /// `--kill-holder` watches for it), waits `delay` (the provider's latency), then spends the
  /// refresh token and issues the next.
  var authorizer: any Authorizer {
    ClosureAuthorizer(isInteractive: false) { request in
      try update { $0.started.append(Date().timeIntervalSince(epoch)) }
      _ = FileManager.default.createFile(
        atPath: directory.appending(path: "authorizing-\(replica)").path, contents: Data())
      if delay > .zero { try await Task.sleep(for: delay) }
      let date = Date()
      let rotation = try update { state in
        let result: Result<RotatingTokenIssuer.Issued, RotatingTokenIssuer.Refusal>
        if let token = request.replacing?.refreshToken {
          state.spent.append(token)
          result = state.issuer.rotate(token, at: date, lifetime: .seconds(lifetime))
        } else {
          result = .success(state.issuer.startFamily(at: date, lifetime: .seconds(lifetime)))
        }
        if case .success = result {
          state.issued += 1
          state.finished.append(Date().timeIntervalSince(epoch))
        }
        return result
      }
      switch rotation {
      case .success(let issued): return Self.model(issued, account: request.key.account)
      case .failure(let refusal): throw RevokedFamily(refusal: refusal)
      }
    }
  }

  static func model(_ issued: RotatingTokenIssuer.Issued, account: String) -> AuthModel {
    AuthModel(
      accessToken: issued.accessToken, account: account, expiresAt: issued.expiresAt,
      refreshToken: issued.refreshToken)
  }

  /// The provider's refusal of a refresh token (`invalid_grant` at a real one).
  struct RevokedFamily: Error, CustomStringConvertible {
    let refusal: RotatingTokenIssuer.Refusal
    var description: String { "invalid_grant: \(refusal)" }
  }

  private func update<T>(_ change: (inout State) -> T) throws -> T {
    let descriptor = open(directory.appending(path: "idp.lock").path, O_CREAT | O_RDWR, 0o600)
    guard descriptor >= 0 else { throw POSIXError(.EIO) }
    defer { close(descriptor) }
    guard flock(descriptor, LOCK_EX) == 0 else { throw POSIXError(.EIO) }
    defer { flock(descriptor, LOCK_UN) }
    var state = try JSONDecoder().decode(State.self, from: Data(contentsOf: stateURL))
    let result = change(&state)
    try JSONEncoder().encode(state).write(to: stateURL, options: .atomic)
    return result
  }
}
