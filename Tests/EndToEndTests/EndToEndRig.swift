import AlipayBridge
import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import LoopbackTokenServer
import Testing

/// The whole account-connect stack wired as an app wires it, with only the two outside parties
/// simulated:
///
/// ```
/// 1,000 mini-program opens ─▶ AuthCoordinator ─▶ AlipayAuthorizer
///   AlipayAuthCodeProvider ── open(url) ──▶ SIMULATED ALIPAY APP
///   AlipayCallbackRouter ◀── safepay callback URL (via the "app delegate") ──┘
///   HTTPTokenExchanger ── HTTP POST ──▶ SIMULATED INTEGRATOR SERVER
///                                       (real python3 HTTP server on 127.0.0.1)
/// ```
///
/// Time is a `ManualClock` shared by the coordinator (deadlines) and the provider (grace
/// period); tests move it, they never sleep. The provider and the exchanger are wrapped in
/// pass-through observers that count calls and record how each ended (never a code or token).
final class EndToEndRig: @unchecked Sendable {
  let key: AccountKey
  let clock = ManualClock()
  let alipay = SimulatedAlipayApp()
  let server: TokenServer
  /// Tags this rig's exchanges on the server (`/echo` records the request under it).
  let echoID = UUID().uuidString
  let store = InMemoryTokenStore()
  let provider: AlipayAuthCodeProvider
  let router: AlipayCallbackRouter
  /// Calls of `provider.authCode(for:)` made by the authorizer, and how each ended.
  let codeRequests = Ledger()
  /// Calls of the HTTP exchanger made by the authorizer, and how each ended.
  let exchanges = Ledger()
  let coordinator: AuthCoordinator
  /// What the coordinator told the SDK-side hook (`ANXMCAccountStatusChangeModel` in an app).
  let statusChanges = Ledger()
  /// Runs the opens ``miniProgramOpens(_:)`` starts, so that a test can await them parking.
  let callers = CallerTracker()

  /// - Parameters:
  ///   - route: The token server route the exchanger posts to (`/echo`, `/slow`, ...).
  ///   - query: Extra parameters sent with the exchange (they shape the server's reply).
  ///   - authorizationTimeout: The coordinator's authorization deadline (manual clock).
  ///   - exchangeTimeout: The coordinator's exchange deadline (manual clock).
  init(
    route: String = "/echo",
    query: [String: String] = [:],
    authorizationTimeout: Duration = .seconds(120),
    exchangeTimeout: Duration = .seconds(30)
  ) throws {
    key = AccountKey(mcUid: "merchant-\(UUID().uuidString.prefix(8))")
    server = try TokenServer.running()

    let alipay = self.alipay
    provider = AlipayAuthCodeProvider(
      clock: clock,
      returnGracePeriod: .seconds(3),
      authURL: { request in
        // SIMULATED INTEGRATOR SIGNING (local, no HTTP): in an app the integrator's server
        // signs this URL and embeds the request id as target_id.
        var components = URLComponents()
        components.scheme = "alipays"
        components.host = "platformapi"
        components.path = "/startapp"
        components.queryItems = [
          URLQueryItem(name: "appId", value: "20000067"),
          URLQueryItem(name: "app_id", value: SimulatedAlipayApp.appID),
          URLQueryItem(name: "scope", value: "auth_user"),
          URLQueryItem(name: "target_id", value: request.requestID),
          URLQueryItem(name: "sign", value: "simulated-signature"),
        ]
        return components.url!
      },
      open: { url in await alipay.open(url) })  // SIMULATED ALIPAY APP
    router = AlipayCallbackRouter(
      provider: provider, appSchemes: [SimulatedAlipayApp.appScheme])

    var parameters = query
    parameters["echo_id"] = echoID
    let exchanger = HTTPTokenExchanger(
      endpoint: server.url(route),  // SIMULATED INTEGRATOR SERVER = REAL HTTP ON LOOPBACK
      encoding: .postForm,
      parameters: parameters,
      timeout: .seconds(60),
      now: clock.dateSource)

    var configuration = AuthCoordinator.Configuration(
      authorizationTimeout: authorizationTimeout, exchangeTimeout: exchangeTimeout)
    configuration.clock = clock
    configuration.now = clock.dateSource
    let statusChanges = self.statusChanges
    coordinator = AuthCoordinator(
      store: store,
      authorizer: AlipayAuthorizer(
        provider: ObservedProvider(inner: provider, ledger: codeRequests),
        exchanger: ObservedExchanger(inner: exchanger, ledger: exchanges)),
      configuration: configuration,
      onAccountStatusChange: { change in
        statusChanges.start()
        statusChanges.end("\(change)")
      })
  }

  /// `count` concurrent mini-program opens, each asking for the login state as the delegate
  /// does. Half pass the container's `extendParams` (without a refresh request).
  func miniProgramOpens(_ count: Int) -> [Task<AuthModel, any Error>] {
    let (coordinator, key) = (self.coordinator, self.key)
    return (0..<count).map { index in
      callers.task {
        if index.isMultiple(of: 2) {
          return try await coordinator.authModel(for: key)
        }
        return try await coordinator.authModel(
          for: key, extendParams: ["NeedRefreshToken": false])
      }
    }
  }

  /// Waits until `count` callers are parked on the key's flight.
  ///
  /// Parking on a flight is counted in the statistics but emits no event: the condition is
  /// checked again each time one of the opens started by ``miniProgramOpens(_:)`` stops running
  /// (``CallerTracker``). Throws when the watchdog expires first.
  func waitForWaiters(_ count: Int, fileID: String = #fileID, line: Int = #line) async throws {
    let coordinator = self.coordinator
    try await callers.waitUntil(fileID: fileID, line: line) {
      coordinator.statistics.waitingCallers >= count
    }
  }

  /// The app delegate's `application(_:open:options:)`: the URL goes to the real router.
  @discardableResult
  func appOpened(_ url: URL) -> URLDisposition { router.handle(url) }

  /// What the server recorded for this rig's last `/echo` exchange.
  func serverRecord() async throws -> [String: String] {
    let (status, record) = try await server.get("/record?id=\(echoID)")
    #expect(status == 200, "the token server recorded no exchange")
    return record["params"] as? [String: String] ?? [:]
  }
}

/// Counts calls and records how each ended. Never records an auth code or a token.
final class Ledger: @unchecked Sendable {
  private let lock = NSLock()
  private var started = 0
  private var ended: [String] = []
  private let changes = ChangeSignal()

  /// How many calls started.
  var calls: Int { lock.withLock { started } }
  /// How the calls that ended ended, in order.
  var outcomes: [String] { lock.withLock { ended } }

  func start() { lock.withLock { started += 1 } }
  func end(_ outcome: String) {
    lock.withLock { ended.append(outcome) }
    changes.changed()
  }

  /// Waits until `count` calls have ended, and returns how the calls that ended ended.
  ///
  /// The ledger's own signal, for outcomes that no ``AuthEvent`` announces (how the provider's
  /// or the exchanger's call ended). Throws when the watchdog expires first.
  func outcomes(
    afterEnding count: Int, fileID: String = #fileID, line: Int = #line
  ) async throws -> [String] {
    try await changes.waitUntil(fileID: fileID, line: line) { [self] in
      lock.withLock { ended.count >= count }
    }
    return outcomes
  }

  /// `success`, `cancelled`, an ``AuthCoordinatorError`` code, or `other`.
  static func describe(_ error: any Error) -> String {
    if error is CancellationError { return "cancelled" }
    if let error = error as? AuthCoordinatorError { return error.code.rawValue }
    return "other"
  }
}

/// A pass-through ``AuthCodeProvider`` that writes each call to a ledger.
struct ObservedProvider: AuthCodeProvider {
  let inner: any AuthCodeProvider
  let ledger: Ledger

  func authCode(for request: AuthorizationRequest) async throws -> AuthCode {
    ledger.start()
    do {
      let code = try await inner.authCode(for: request)
      ledger.end("success")
      return code
    } catch {
      ledger.end(Ledger.describe(error))
      throw error
    }
  }
}

/// A pass-through ``TokenExchanger`` that writes each call to a ledger.
struct ObservedExchanger: TokenExchanger {
  let inner: HTTPTokenExchanger
  let ledger: Ledger

  func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel {
    ledger.start()
    do {
      let model = try await inner.exchange(code, for: request)
      ledger.end("success")
      return model
    } catch {
      ledger.end(Ledger.describe(error))
      throw error
    }
  }
}

/// Awaits every task; returns the error codes of the failures (`success` for a model,
/// `cancelled` for `CancellationError`).
func outcomes(_ tasks: [Task<AuthModel, any Error>]) async -> [String] {
  var result: [String] = []
  for task in tasks {
    do {
      _ = try await task.value
      result.append("success")
    } catch {
      result.append(Ledger.describe(error))
    }
  }
  return result
}

/// Whether `text` shows any of `secrets`.
func leaks(_ text: String, _ secrets: [String]) -> Bool {
  secrets.contains { !$0.isEmpty && text.contains($0) }
}

extension AuthEvent {
  /// Whether this is a `.lateResultDiscarded`.
  var isLateResultDiscarded: Bool {
    if case .lateResultDiscarded = self { true } else { false }
  }
}
