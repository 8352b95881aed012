import AlipayBridge
import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// The integrator's server of the demo: the REAL `AlipayTokenService` (module
/// `AlipayBridgeServer`: its endpoints, its own coordinator, its client of
/// `alipay.system.oauth.token`) over the TestKit's SIMULATED Alipay gateway, signed by the
/// TestKit's `TestSigner` (a non-cryptographic stand-in for the integrator's RSA2 key).
///
/// The hop from the app is in process, with no socket: the app's real request builders
/// (``HTTPTokenExchanger``, ``HTTPTokenRefresher``) make each request, the service's
/// `respond(to:)` answers it, and the app's real reply parsers read the answer. The same hop
/// over a real socket is tested in `AlipayBridgeServerTests`. ``isDown`` simulates an outage of
/// the server (HTTP 503 from its load balancer).
final class SimulatedIntegratorServer: Sendable {
  static let appID = "2021000000000000"
  static let scope = "auth_user"

  let clock: VirtualClock
  let latency: Duration
  let timeline: Timeline
  let gateway: SimulatedAlipayGateway
  let service: AlipayTokenService
  let exchanger: Exchanger
  let refresher: Refresher
  private let counters = LockedCounters()

  init(
    clock: VirtualClock, latency: Duration, tokenLifetime: Duration, familyLifetime: Duration,
    timeline: Timeline
  ) {
    self.clock = clock
    self.latency = latency
    self.timeline = timeline
    let signer = TestSigner(key: "simulated-integrator-key")
    let now: @Sendable () -> Date = { timeline.date }
    gateway = SimulatedAlipayGateway(
      appID: Self.appID, accessTokenLifetime: tokenLifetime, familyLifetime: familyLifetime,
      date: now, verifier: { signer.verify($0, $1) })
    let api = AlipayTokenAPI(
      appID: Self.appID, gateway: URL(string: "https://openapi.alipay.com/gateway.do")!,
      transport: gateway, now: now, signer: { signer.sign($0) })
    var configuration = AuthCoordinator.Configuration()
    configuration.clock = clock
    configuration.now = now
    service = AlipayTokenService(api: api, scope: Self.scope, configuration: configuration)
    let endpoint = URL(string: "https://integrator.example")!
    exchanger = Exchanger(
      http: HTTPTokenExchanger(
        endpoint: endpoint.appendingPathComponent("alipay/token"), now: now))
    refresher = Refresher(
      http: HTTPTokenRefresher(
        endpoint: endpoint.appendingPathComponent("alipay/refresh"), now: now))
    exchanger.server.set(self)
    refresher.server.set(self)
  }

  /// Whether the server is down: every request gets HTTP 503 without reaching the service.
  var isDown: Bool {
    get { counters.read { $0.down } }
    set { counters.update { $0.down = newValue } }
  }

  /// Auth codes exchanged (sign-ins that reached the service).
  var exchanges: Int { counters.read { $0.exchanges } }
  /// Refreshes the server answered with a model (no bounce).
  var silentRefreshes: Int { counters.read { $0.silentRefreshes } }
  /// Refreshes answered "the user must authorize".
  var authorizationsRequired: Int { counters.read { $0.authorizationsRequired } }
  /// Requests the app sent while the server was down.
  var requestsWhileDown: Int { counters.read { $0.whileDown } }

  /// One request through the hop: the latency, then the service's answer (or an outage's 503).
  func respond(to request: URLRequest, path: String) async throws -> (HTTPURLResponse, Data) {
    try await clock.sleep(for: latency)
    let response: AlipayServiceResponse
    if isDown {
      counters.update { $0.whileDown += 1 }
      timeline.log("the integrator's server is down: HTTP 503")
      response = AlipayServiceResponse(
        status: 503, headers: ["Content-Type": "application/json"],
        body: Data(#"{"error":"temporarily_unavailable"}"#.utf8))
    } else {
      response = await service.respond(
        to: AlipayServiceRequest(
          path: path, headers: request.allHTTPHeaderFields ?? [:],
          body: request.httpBody ?? Data()))
      counters.update {
        switch (path, response.status) {
        case (AlipayTokenService.tokenPath, 200): $0.exchanges += 1
        case (AlipayTokenService.refreshPath, 200): $0.silentRefreshes += 1
        case (AlipayTokenService.refreshPath, 401): $0.authorizationsRequired += 1
        default: break
        }
      }
      switch (path, response.status) {
      case (AlipayTokenService.tokenPath, 200):
        timeline.log("the integrator's server redeemed the auth code at Alipay's gateway")
      case (AlipayTokenService.refreshPath, 200):
        timeline.log("the integrator's server answered the refresh (no bounce)")
      case (AlipayTokenService.refreshPath, 401):
        timeline.log("the integrator's server: the user must authorize (HTTP 401)")
      case (_, let status):
        timeline.log("the integrator's server answered HTTP \(status)")
      }
    }
    let http = HTTPURLResponse(
      url: request.url!, statusCode: response.status, httpVersion: "HTTP/1.1",
      headerFields: response.headers)!
    return (http, response.body)
  }

  /// The app's exchanger: ``HTTPTokenExchanger``'s request and reply, through the hop.
  struct Exchanger: TokenExchanger {
    let http: HTTPTokenExchanger
    let server = ServerBox()

    func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel {
      let urlRequest = try http.makeRequest(code: code, key: request.key)
      let (response, body) = try await server.get.respond(
        to: urlRequest, path: AlipayTokenService.tokenPath)
      return try http.model(fromResponse: response, body: body, code: code, key: request.key)
    }
  }

  /// The app's silent stage: ``HTTPTokenRefresher``'s request and reply, through the hop.
  struct Refresher: Authorizer {
    let http: HTTPTokenRefresher
    let server = ServerBox()

    var isInteractive: Bool { false }
    var silentRefresh: SilentRefreshPolicy? { http.silentRefresh }
    var longestRefresh: Duration? { http.longestRefresh }

    func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
      let rejected = request.reason == .forcedRefresh ? request.replacing?.accessToken : nil
      let urlRequest = http.makeRequest(key: request.key, rejecting: rejected)
      let (response, body) = try await server.get.respond(
        to: urlRequest, path: AlipayTokenService.refreshPath)
      return try http.model(fromResponse: response, body: body, key: request.key)
    }
  }

  /// The server, set once after it is made (the hop's two ends refer to each other).
  final class ServerBox: @unchecked Sendable {
    private let lock = NSLock()
    private weak var server: SimulatedIntegratorServer?
    func set(_ server: SimulatedIntegratorServer) { lock.withLock { self.server = server } }
    var get: SimulatedIntegratorServer {
      guard let server = lock.withLock({ server }) else {
        preconditionFailure("the demo's integrator server is gone")
      }
      return server
    }
  }

  private struct Counts {
    var down = false
    var exchanges = 0
    var silentRefreshes = 0
    var authorizationsRequired = 0
    var whileDown = 0
  }

  private final class LockedCounters: @unchecked Sendable {
    private let lock = NSLock()
    private var counts = Counts()
    func read<T>(_ body: (Counts) -> T) -> T { lock.withLock { body(counts) } }
    func update(_ body: (inout Counts) -> Void) { lock.withLock { body(&counts) } }
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
