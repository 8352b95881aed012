import AlipayBridge
import AuthCoordinator
import Foundation

/// A SIMULATION of the integrator's server, in process: it "exchanges" an auth code for a model
/// after a short delay on the demo's clock, issuing a new token each time. The real exchange
/// over HTTP is ``HTTPTokenExchanger``, tested against a loopback server in `ExchangerTests`.
final class SimulatedIntegratorServer: TokenExchanger {
  let clock: VirtualClock
  let latency: Duration
  let tokenLifetime: Duration
  let timeline: Timeline
  private let issued = Counter()

  init(clock: VirtualClock, latency: Duration, tokenLifetime: Duration, timeline: Timeline) {
    self.clock = clock
    self.latency = latency
    self.tokenLifetime = tokenLifetime
    self.timeline = timeline
  }

  var exchanges: Int { issued.value }

  func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel {
    try await clock.sleep(for: latency)
    let number = issued.increment()
    timeline.log("the integrator's server exchanged the auth code (token #\(number) issued)")
    return AuthModel(
      uid: code.userID ?? "2088000000000001",
      accessToken: "simulated-token-\(number)-\(UUID().uuidString)",
      mcUid: request.key.mcUid,
      expiresAt: timeline.date.addingTimeInterval(tokenLifetime.seconds))
  }
}

/// A thread-safe counter.
final class Counter: @unchecked Sendable {
  private let lock = NSLock()
  private var count = 0
  var value: Int { lock.withLock { count } }
  @discardableResult func increment(by amount: Int = 1) -> Int {
    lock.withLock {
      count += amount
      return count
    }
  }
}
