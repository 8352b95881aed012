import AuthCoordinator
import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A SIMULATED identity provider shared by the demo's replica processes: a JSON state file in
/// the run's directory, changed under `flock(2)`. It issues rotating refresh tokens, counts the
/// authorizations it completed, and records every refresh token spent. It accepts only the
/// newest refresh token it issued: a second spend of one token is a reuse, and any refresh with
/// another token revokes the family (as a real provider with rotation does), after which every
/// refresh fails. It stands in for the integrator's token endpoint, which the demo does not
/// have.
struct SimulatedIdentityProvider: Sendable {
  struct State: Codable {
    var issued = 0
    var spent: [String] = []
    var reuses = 0
    /// 1 once a refresh presented a token other than the newest (the family is revoked).
    var revokedFamilies = 0
    /// Seconds since the run's start at which each authorization began and ended.
    var started: [Double] = []
    var finished: [Double] = []
  }

  let directory: URL
  let replica: Int
  let delay: Duration
  /// How long an issued access token lives, in seconds.
  let lifetime: TimeInterval
  let epoch: Date

  private var stateURL: URL { directory.appending(path: "idp.json") }

  static func reset(in directory: URL) throws {
    try JSONEncoder().encode(State()).write(to: directory.appending(path: "idp.json"))
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
      let issued = try update { state -> Int? in
        if let token = request.replacing?.refreshToken {
          if state.spent.contains(token) { state.reuses += 1 }
          if token != "RT-\(state.issued)" { state.revokedFamilies = 1 }
          state.spent.append(token)
        }
        guard state.revokedFamilies == 0 else { return nil }
        state.issued += 1
        state.finished.append(Date().timeIntervalSince(epoch))
        return state.issued
      }
      guard let issued else { throw RevokedFamily() }
      return AuthModel(
        accessToken: "AT-\(issued)", account: request.key.account,
        expiresAt: Date(timeIntervalSinceNow: lifetime), refreshToken: "RT-\(issued)")
    }
  }

  /// The provider's answer once the family is revoked (`invalid_grant` at a real one).
  struct RevokedFamily: Error, CustomStringConvertible {
    var description: String { "invalid_grant: the refresh-token family was revoked" }
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
