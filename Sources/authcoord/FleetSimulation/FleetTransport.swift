import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Which key and call a token request is for: set by ``FleetAuthorizer`` around the real
/// authorizer, read by ``FleetTransport`` (the token form does not name the key).
enum FleetContext {
  @TaskLocal static var key: AccountKey?
  @TaskLocal static var caller: String?
}

/// The REAL `OAuth2Authorizer`, told which key it authorizes for (``FleetContext``). Everything
/// the coordinator asks of an authorizer is the real one's.
struct FleetAuthorizer: Authorizer {
  let inner: OAuth2Authorizer
  let process: Int
  let calls = FleetCounter()

  var isInteractive: Bool { inner.isInteractive }
  var silentRefresh: SilentRefreshPolicy? { inner.silentRefresh }
  var longestRefresh: Duration? { inner.longestRefresh }

  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let caller = "p\(process)#\(calls.next())"
    return try await FleetContext.$key.withValue(request.key) {
      try await FleetContext.$caller.withValue(caller) { try await inner.authorize(request) }
    }
  }
}

/// A counter for names, and the seed being run (for a message from the driver thread).
final class FleetCounter: @unchecked Sendable {
  private let lock = NSLock()
  private var storage = 0
  func next() -> Int {
    lock.withLock {
      storage += 1
      return storage
    }
  }
  var value: Int { lock.withLock { storage } }
  func set(_ new: Int) { lock.withLock { storage = new } }
}

/// One simulated process's way to the SIMULATED token server (the TestKit's
/// `SimulatedTokenServer`, shared by the fleet: it rotates refresh tokens, accepts each once,
/// revokes a family on reuse). It adds the network's and the process's faults: the process's
/// pauses hold a request at its send and its response on its way back; some requests are
/// dropped before they reach the server, some answered 503 with `Retry-After`, some answered
/// late, some garbled after the server answered 200 (it rotated; the reply is cut short). It records, for the reuse classification, every refresh-token spend and reuse with
/// whether the process held a live grant for the key when the request was handed over and when
/// it left.
struct FleetTransport: HTTPTransport {
  let server: SimulatedTokenServer
  /// Whether the process shares one lease with the others (not under the `no-lease` plant):
  /// then no token request may leave while the key backs off.
  let sharesTheLease: Bool
  let outage: FleetOutage
  let process: FleetProcessState
  let clock: VirtualClock
  let ledger: FleetLedger

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let key = FleetContext.key
    let caller = FleetContext.caller ?? "p\(process.index)"
    let form = Self.form(request.urlRequest.httpBody ?? Data())
    let refreshToken = form["grant_type"] == "refresh_token" ? form["refresh_token"] : nil
    let liveAtEntry = key.map { ledger.holdsLiveLease($0, process: process.index) } ?? false
    if let key { ledger.began(.tokenRequest, key.account, process: process.index) }
    defer { if let key { ledger.ended(.tokenRequest, key.account, process: process.index) } }
    await process.gate(clock)
    let send = FleetLedger.Send(
      caller: caller, process: process.index, at: clock.world.now, liveAtEntry: liveAtEntry,
      liveAtLeft: key.map { ledger.holdsLiveLease($0, process: process.index) } ?? false)
    if let key, sharesTheLease, let until = ledger.backOffEnd(key) {
      switch Self.duringABackOff(liveAtEntry: send.liveAtEntry, liveAtLeft: send.liveAtLeft) {
      case .inTheGapAtTheSend:
        // Its grant lapsed while the request was on its way out (a pause after the last
        // check): the stated gap at the send, counted apart as its reuses are.
        ledger.count("token request during a back-off, in the gap at the send")
      case .violation:
        ledger.violation(
          "token request during a back-off",
          "\(caller)'s token request for \(key.account) left while the lease made the key back "
            + "off until \(String(format: "%.3f", until.timeIntervalSince(ledger.date))) s from now"
        )
      }
    }
    let faults = process.faults
    if faults.outages > 0, outage.isDown(at: clock.world.now) {
      ledger.count("fault: request during an outage")
      ledger.note("\(caller): token server down (outage)")
      if process.draw({ $0.chance(50) }) { throw URLError(.cannotConnectToHost) }
      return Self.unavailable(
        request, retryAfter: process.draw { Int.random(in: 1...3, using: &$0) })
    }
    if process.draw({ $0.chance(faults.dropped) }) {
      ledger.count("fault: request dropped")
      ledger.note("\(caller): token request dropped before the server")
      throw URLError(.networkConnectionLost)
    }
    if process.draw({ $0.chance(faults.unavailable) }) {
      let retryAfter = process.draw { Int.random(in: 1...3, using: &$0) }
      let status = process.answersTooManyRequests() ? 429 : 503
      ledger.count("fault: \(status)")
      ledger.note("\(caller): token server answered \(status), Retry-After \(retryAfter)")
      return Self.unavailable(request, retryAfter: retryAfter, status: status)
    }
    let outcome = try await server.send(request)
    if case .complete(let response, let body) = outcome,
      (response as? HTTPURLResponse)?.statusCode == 200,
      let reply = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
    {
      ledger.issued(
        access: reply["access_token"] as? String, refresh: reply["refresh_token"] as? String,
        spent: refreshToken, sentAt: send.at)
    }
    if let refreshToken, case .complete(let response, let body) = outcome,
      let status = (response as? HTTPURLResponse)?.statusCode
    {
      let reply = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
      if status == 200 {
        ledger.spent(refreshToken, by: send, next: reply?["refresh_token"] as? String)
        ledger.note("\(caller): spent \(Self.short(refreshToken))")
      } else if (reply?["error_description"] as? String)?.contains("reused") == true {
        ledger.reused(refreshToken, by: send)
        ledger.note("\(caller): presented \(Self.short(refreshToken)) again: family revoked")
      }
    } else if refreshToken == nil {
      ledger.note("\(caller): client_credentials grant for \(key?.account ?? "?")")
    }
    if faults.garbledReplies > 0, case .complete(let response, let body) = outcome,
      (response as? HTTPURLResponse)?.statusCode == 200,
      process.drawLater({ $0.chance(faults.garbledReplies) })
    {
      // The server rotated and answered; what reaches the client is cut short (a proxy, a
      // broken connection mid-body): the new tokens are lost to it, as with a lost reply.
      ledger.count("fault: garbled reply after the server answered")
      ledger.note("\(caller): the reply was garbled on its way back")
      let reply = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
      if let lost = reply?["refresh_token"] as? String { ledger.undelivered(lost) }
      await process.gate(clock)
      return .complete(response, Data(#"{"access_token":"simulated-acc"#.utf8))
    }
    if process.draw({ $0.chance(faults.slowReplies) }) {
      ledger.count("fault: slow reply")
      try await clock.sleep(for: .seconds(process.draw { Int.random(in: 2...8, using: &$0) }))
    }
    // The response reaches a paused process when the pause ends.
    if refreshToken != nil {
      await process.maybePause(at: "afterRequest", clock: clock, ledger: ledger)
    }
    await process.gate(clock)
    try Task.checkCancellation()
    return outcome
  }

  /// What a token request that leaves while its key backs off is (rules 26 and 29: one
  /// request per back-off step, fleet-wide).
  enum DuringABackOff: Equatable {
    /// Its process held a live grant when the request was handed over, and lost it before the
    /// request left: a pause between the last check and the send.
    case inTheGapAtTheSend
    /// Any other: a request the lease should have kept back.
    case violation
  }

  /// Classifies a request that left during a back-off by whether its process held a live grant
  /// for the key when the request was handed over and when it left.
  static func duringABackOff(liveAtEntry: Bool, liveAtLeft: Bool) -> DuringABackOff {
    liveAtEntry && !liveAtLeft ? .inTheGapAtTheSend : .violation
  }

  /// A 503 (or a 429: too many requests) with `Retry-After`.
  static func unavailable(
    _ request: HTTPTransportRequest, retryAfter: Int, status: Int = 503
  ) -> HTTPTransportOutcome {
    .complete(
      HTTPURLResponse(
        url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1",
        headerFields: ["Retry-After": "\(retryAfter)", "Content-Type": "application/json"])!,
      Data(
        status == 429
          ? #"{"error":"slow_down","error_description":"rate limited"}"#.utf8
          : #"{"error":"temporarily_unavailable"}"#.utf8))
  }

  static func short(_ token: String) -> String {
    token.replacingOccurrences(of: "simulated-refresh-", with: "rt-")
  }

  static func form(_ body: Data) -> [String: String] {
    var fields: [String: String] = [:]
    for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
      let parts = pair.split(separator: "=", maxSplits: 1).map { part in
        // Most fields carry neither `+` nor `%`: no Foundation call for them.
        guard part.contains(where: { $0 == "+" || $0 == "%" }) else { return String(part) }
        return String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? ""
      }
      fields[parts[0]] = parts.count > 1 ? parts[1] : ""
    }
    return fields
  }
}
