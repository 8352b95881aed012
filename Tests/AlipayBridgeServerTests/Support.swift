import AlipayBridgeServer
import AuthCoordinator
import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

let testAppID = "2021000000000001"
let testUser = "2088000000000001"
let testSigner = TestSigner(key: "integrator-test-key")

/// A transport that records each request and answers from a script.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
  enum Step: Sendable {
    case reply(status: Int, headers: [String: String], body: String)
    case fail(URLError.Code)
  }

  private let state: LockedState<(requests: [URLRequest], steps: [Step])>

  init(_ steps: [Step]) { state = LockedState(([], steps)) }

  var requests: [URLRequest] { state.withLock { $0.requests } }

  func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    let step = state.withLock { state -> Step in
      state.requests.append(request.urlRequest)
      return state.steps.isEmpty ? .fail(.cannotConnectToHost) : state.steps.removeFirst()
    }
    switch step {
    case .reply(let status, let headers, let body):
      let response = HTTPURLResponse(
        url: request.urlRequest.url!, statusCode: status, httpVersion: "HTTP/1.1",
        headerFields: headers)!
      return .complete(response, Data(body.utf8))
    case .fail(let code):
      throw URLError(code)
    }
  }
}

/// The fields of a form body.
func formFields(_ body: Data?) -> [String: String] {
  AlipayServiceRequest(
    path: "/", headers: ["Content-Type": "application/x-www-form-urlencoded"],
    body: body ?? Data()
  ).fields ?? [:]
}

/// Adapts a loopback request to the service's HTTP-neutral request.
func serviceRequest(_ request: LoopbackHTTPRequest) -> AlipayServiceRequest {
  AlipayServiceRequest(
    method: request.method, path: request.path, headers: request.headers, body: request.body)
}

/// Sends a form `POST` over a real socket and returns the status, headers and JSON body.
func post(_ url: URL, _ fields: [(String, String)]) async throws -> (
  status: Int, headers: [String: String], json: [String: Any]
) {
  var request = URLRequest(url: url)
  request.httpMethod = "POST"
  request.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
  request.httpBody = Data(
    fields.map {
      "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0.1)"
    }
    .joined(separator: "&").utf8)
  let (data, response) = try await URLSession.shared.data(for: request)
  let http = response as! HTTPURLResponse
  var headers: [String: String] = [:]
  for (name, value) in http.allHeaderFields {
    headers[String(describing: name).lowercased()] = String(describing: value)
  }
  let json = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
  return (http.statusCode, headers, json)
}

/// The gateway on a loopback socket, and services (replicas) that call it over URLSession.
final class Rig: Sendable {
  let clock = ManualClock()
  let gateway: SimulatedAlipayGateway
  let gatewayServer: LoopbackHTTPServer
  let gatewayURL: URL
  let store = InMemoryTokenStore()
  let lease: InMemoryAuthorizationLease

  init(
    accessTokenLifetime: Duration = .seconds(3600), familyLifetime: Duration = .seconds(30 * 86_400)
  ) throws {
    let clock = clock
    gateway = SimulatedAlipayGateway(
      appID: testAppID, accessTokenLifetime: accessTokenLifetime, familyLifetime: familyLifetime,
      date: clock.dateSource, verifier: testSigner.verify)
    gatewayServer = LoopbackHTTPServer(handler: gateway.handle)
    gatewayURL = try gatewayServer.start().appendingPathComponent("gateway.do")
    lease = InMemoryAuthorizationLease(now: clock.dateSource)
  }

  deinit { gatewayServer.stop() }

  func api(signer: TestSigner = testSigner) -> AlipayTokenAPI {
    // A 30 s request timeout: on a loaded CI machine a slow loopback answer is not the failure
    // these tests look for.
    AlipayTokenAPI(
      appID: testAppID, gateway: gatewayURL, timeout: .seconds(30), now: clock.dateSource
    ) { content in signer.sign(content) }
  }

  /// A replica: its own coordinator over the shared store and lease.
  func service(maxAttempts: Int = 3, signer: TestSigner = testSigner) -> AlipayTokenService {
    AlipayTokenService(
      api: api(signer: signer), scope: "auth_user", store: store, lease: lease,
      configuration: AuthCoordinator.Configuration(
        authorizationTimeout: .seconds(60),
        silentRefresh: SilentRefreshPolicy(
          refreshAhead: nil, maxAttempts: maxAttempts, retryDelay: .zero, failureCooldown: .zero),
        now: clock.dateSource))
  }
}
