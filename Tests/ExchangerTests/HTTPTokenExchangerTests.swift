import AuthCoordinator
import Foundation
import HTTPSupport
import LoopbackTokenServer
import Testing

@testable import AlipayBridge

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A fixed wall clock, so `expiresAt` is exact.
private let fixedNow = Date(timeIntervalSince1970: 1_800_000_000)

/// A unique, recognisable auth code per test (with characters that need encoding).
private func makeCode() -> AuthCode {
  AuthCode("CODE+\(UUID().uuidString.prefix(8))/x=y&z", appID: "2021000000000000")
}

private func request(_ mcUid: String = "merchant-1") -> AuthorizationRequest {
  AuthorizationRequest(
    key: AccountKey(account: mcUid), reason: .missing, requestID: UUID().uuidString)
}

private func exchanger(
  _ server: TokenServer,
  _ path: String,
  encoding: HTTPTokenExchanger.Encoding = .postForm,
  parameters: [String: String] = [:],
  timeout: Duration = .seconds(5),
  maxBodySize: Int = 1 << 20,
  session: URLSession? = nil
) -> HTTPTokenExchanger {
  HTTPTokenExchanger(
    endpoint: server.url(path), encoding: encoding, parameters: parameters,
    timeout: timeout, maxBodySize: maxBodySize, session: session, now: { fixedNow })
}

/// Runs a failing exchange and returns its error, checking the wrapping and that no text
/// derived from the error shows the code or the token.
private func failure(
  _ exchanger: HTTPTokenExchanger,
  code: AuthCode,
  mcUid: String = "merchant-1",
  expect expected: AuthCoordinatorError.Code = .exchangeFailed,
  sourceLocation: SourceLocation = #_sourceLocation
) async throws -> TokenExchangeError {
  let error = try await #require(
    throws: AuthCoordinatorError.self, sourceLocation: sourceLocation
  ) {
    _ = try await exchanger.exchange(code, for: request(mcUid))
  }
  return try redactedCause(of: error, code: code, expect: expected, sourceLocation: sourceLocation)
}

/// The ``TokenExchangeError`` under `error`, checking the wrapping and that no text derived from
/// the error shows the code or the token.
private func redactedCause(
  of error: AuthCoordinatorError,
  code: AuthCode,
  expect expected: AuthCoordinatorError.Code = .exchangeFailed,
  sourceLocation: SourceLocation = #_sourceLocation
) throws -> TokenExchangeError {
  #expect(error.code == expected, sourceLocation: sourceLocation)
  let cause = try #require(
    error.underlying as? TokenExchangeError, sourceLocation: sourceLocation)
  var dumped = ""
  dump(error, to: &dumped)
  let texts = [
    String(describing: error), String(reflecting: error), error.message, dumped,
    String(describing: cause), cause.bodyExcerpt ?? "",
  ]
  let encoded = HTTPTokenExchanger.formEncode(code.value)
  for text in texts {
    #expect(!text.contains(code.value), "auth code leaked: \(text)", sourceLocation: sourceLocation)
    #expect(!text.contains(encoded), "auth code leaked: \(text)", sourceLocation: sourceLocation)
    #expect(
      !text.contains(TokenServer.token), "token leaked: \(text)", sourceLocation: sourceLocation)
  }
  return cause
}

@Suite("HTTPTokenExchanger against a real HTTP server", .timeLimit(.minutes(5)))
struct HTTPTokenExchangerTests {
  struct Shape: Sendable, CustomTestStringConvertible {
    var path: String
    var expiresAs: String
    var testDescription: String { "\(path) expires_in as \(expiresAs)" }
  }

  @Test(
    "decodes every reply shape",
    arguments: [
      Shape(path: "/ok", expiresAs: "number"), Shape(path: "/ok", expiresAs: "string"),
      Shape(path: "/ok", expiresAs: "none"),
      Shape(path: "/ok-flat", expiresAs: "number"), Shape(path: "/ok-flat", expiresAs: "string"),
      Shape(path: "/ok-flat-camel", expiresAs: "number"),
      Shape(path: "/ok-flat-camel", expiresAs: "string"),
    ])
  func decodesShape(_ shape: Shape) async throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(server, shape.path, parameters: ["expires_as": shape.expiresAs])
    let model = try await exchanger.exchange(makeCode(), for: request("merchant-7"))
    #expect(model.uid == TokenServer.userID)
    #expect(model.accessToken == TokenServer.token)
    #expect(model.mcUid == "merchant-7")
    if shape.expiresAs == "none" {
      #expect(model.expiresAt == nil)
    } else {
      #expect(model.expiresAt == fixedNow.addingTimeInterval(1_296_000))
    }
  }

  @Test("sends GET query, POST form and POST JSON", arguments: HTTPTokenExchanger.Encoding.allCases)
  func encodesRequest(_ encoding: HTTPTokenExchanger.Encoding) async throws {
    let server = try TokenServer.running()
    let echoID = UUID().uuidString
    let code = makeCode()
    var exchanger = exchanger(
      server, "/echo?fixed=1", encoding: encoding,
      parameters: ["echo_id": echoID, "app_version": "4.2 beta", "auth_code": "overridden"])
    exchanger.headers = ["X-Client": "tests"]
    let model = try await exchanger.exchange(code, for: request("merchant 8"))
    #expect(model.mcUid == "merchant 8")

    let (status, record) = try await server.get("/record?id=\(echoID)")
    #expect(status == 200)
    let params = try #require(record["params"] as? [String: String])
    #expect(params["auth_code"] == code.value)
    #expect(params["mc_uid"] == "merchant 8")
    #expect(params["app_version"] == "4.2 beta")
    #expect(params["fixed"] == "1")
    let headers = try #require(record["headers"] as? [String: String])
    #expect(headers["x-client"] == "tests")
    #expect(headers["accept"] == "application/json")
    let method = record["method"] as? String
    let contentType = record["content_type"] as? String
    let query = record["query"] as? String ?? ""
    let body = record["body"] as? String ?? ""
    switch encoding {
    case .getQuery:
      #expect(method == "GET")
      #expect(body.isEmpty)
      #expect(query.hasPrefix("fixed=1&"))
      #expect(query.contains("auth_code=\(HTTPTokenExchanger.formEncode(code.value))"))
    case .postForm:
      #expect(method == "POST")
      #expect(contentType == "application/x-www-form-urlencoded; charset=utf-8")
      #expect(query == "fixed=1")
      let encodedCode = HTTPTokenExchanger.formEncode(code.value)
      #expect(body.hasSuffix("mc_uid=merchant%208&auth_code=\(encodedCode)"))
      #expect(body.hasPrefix("app_version=4.2%20beta&echo_id="))
    case .postJSON:
      #expect(method == "POST")
      #expect(contentType == "application/json; charset=utf-8")
      let json = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: String]
      #expect(json?["auth_code"] == code.value)
      #expect(json?["mc_uid"] == "merchant 8")
    }
  }

  @Test("custom parameter names")
  func customParameterNames() async throws {
    let server = try TokenServer.running()
    let echoID = UUID().uuidString
    let code = makeCode()
    let exchanger = HTTPTokenExchanger(
      endpoint: server.url("/echo"), encoding: .postJSON, codeParameter: "code",
      mcUidParameter: "merchant_user", parameters: ["echo_id": echoID])
    // The server echoes mc_uid as mc_user_id; it got none, so the key's mcUid is used.
    let model = try await exchanger.exchange(code, for: request("m-9"))
    #expect(model.mcUid == "m-9")
    let (_, record) = try await server.get("/record?id=\(echoID)")
    let params = try #require(record["params"] as? [String: String])
    #expect(params["code"] == code.value)
    #expect(params["merchant_user"] == "m-9")
    #expect(params["auth_code"] == nil)
  }

  @Test(
    "a slow server times out at the client's timeout",
    arguments: [
      HTTPTokenExchanger.Encoding.getQuery, .postForm,
    ])
  func slowServerTimesOut(_ encoding: HTTPTokenExchanger.Encoding) async throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(
      server, "/slow", encoding: encoding, parameters: ["delay": "5"],
      timeout: .milliseconds(500))
    // The server answers only after 5 s, with a success: a timed-out failure can only come
    // from the client's timeout. (No wall-clock bound: it failed on a loaded machine.)
    let cause = try await failure(exchanger, code: makeCode(), expect: .timedOut)
    #expect(cause.code == .timedOut)
    #expect(cause.urlErrorCode == URLError.timedOut.rawValue)
  }

  /// A sub-second timeout is not rounded to whole seconds (0 would time out at once, 1 would
  /// wait too long): the request carries it to the millisecond. (This once sent a real request
  /// against a 900 ms bound, and a loaded machine broke it: the client's timeout applied for
  /// real is "a slow server times out at the client's timeout".)
  @Test("a sub-second timeout reaches the request unrounded", arguments: [900, 250, 1_500])
  func subSecondTimeout(milliseconds: Int) throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(server, "/ok", timeout: .milliseconds(milliseconds))
    let urlRequest = try exchanger.makeRequest(code: makeCode(), key: request().key)
    #expect(abs(urlRequest.timeoutInterval - Double(milliseconds) / 1000) < 1e-9)
  }

  @Test("HTTP 500 carries the status and a redacted excerpt")
  func serverError() async throws {
    let server = try TokenServer.running()
    let cause = try await failure(exchanger(server, "/500"), code: makeCode())
    #expect(cause.code == .httpStatus)
    #expect(cause.statusCode == 500)
    let excerpt = try #require(cause.bodyExcerpt)
    #expect(excerpt.contains("boom"))
    #expect(excerpt.contains("<redacted>"))
  }

  @Test(
    "a 401 with a challenge is an HTTP status failure at once",
    arguments: [
      #"Basic realm="integrator""#, #"Bearer realm="api", error="invalid_token""#,
      #"Bearer realm="api", error="invalid_token", Basic realm="api""#,
    ])
  func challenged(_ challenge: String) async throws {
    let server = try TokenServer.running()
    // A timeout far above the bound below: a stall would end as timed_out after 60 s.
    let exchanger = exchanger(
      server, "/unauthorized", parameters: ["challenge": challenge], timeout: .seconds(60))
    let started = ContinuousClock.now
    let cause = try await failure(exchanger, code: makeCode())
    #expect(cause.code == .httpStatus)
    #expect(cause.statusCode == 401)
    // Real time is the property, with a wide margin for a loaded machine.
    #expect(ContinuousClock.now - started < .seconds(30))
  }

  @Test("a body that is not JSON")
  func badJSON() async throws {
    let server = try TokenServer.running()
    for encoding in HTTPTokenExchanger.Encoding.allCases {
      let cause = try await failure(
        exchanger(server, "/badjson", encoding: encoding), code: makeCode())
      #expect(cause.code == .invalidJSON)
      #expect(cause.statusCode == 200)
      #expect(cause.bodyExcerpt?.hasPrefix("<html>upstream error") == true)
    }
  }

  @Test("missing user_id or access_token names the field", arguments: ["user_id", "access_token"])
  func missingField(_ field: String) async throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(server, "/missing", parameters: ["drop": field])
    let cause = try await failure(exchanger, code: makeCode())
    #expect(cause.code == .missingField)
    #expect(cause.field == "alipay_system_oauth_token_response.\(field)")
  }

  @Test("Alipay's error_response is a rejection")
  func rejected() async throws {
    let server = try TokenServer.running()
    let cause = try await failure(exchanger(server, "/rejected"), code: makeCode())
    #expect(cause.code == .serverRejected)
    #expect(cause.serverCode == "isv.code-invalid")
  }

  @Test(
    "a huge body stops at the limit", arguments: ["/huge?mb=4", "/huge?mb=4&chunked=1"])
  func hugeBody(_ path: String) async throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(server, path, encoding: .getQuery, maxBodySize: 256 * 1024)
    let cause = try await failure(exchanger, code: makeCode())
    #expect(cause.code == .bodyTooLarge)
    #expect(cause.statusCode == 200)
  }

  @Test("a reply bound to another host-app user is refused")
  func userMismatch() async throws {
    let server = try TokenServer.running()
    let cause = try await failure(exchanger(server, "/mismatch"), code: makeCode())
    #expect(cause.code == .userMismatch)
    #expect(cause.field == "mc_user_id")
    #expect(cause.bodyExcerpt?.contains("someone-else") == true)
  }

  @Test("a refused connection is a transport error")
  func connectionRefused() async throws {
    let exchanger = HTTPTokenExchanger(
      endpoint: URL(string: "http://127.0.0.1:1/token")!, encoding: .getQuery)
    let cause = try await failure(exchanger, code: makeCode())
    #expect(cause.code == .transport)
    #expect(cause.urlErrorCode != nil)
  }

  @Test("cancelling the Task cancels the request the server holds")
  func cancellationInFlight() async throws {
    let server = try TokenServer.running()
    let echoID = UUID().uuidString
    // Bounds generous for a loaded full run on two cores: there the request took more than
    // 10 s to reach the server in 2 of 3 runs, and /arrived, which waited 10 s, gave up. It now
    // waits up to 45 s (URLSession.shared gives up at 60), and the bound below counts from the
    // cancellation. The server holds the request 30 s, so a cancellation that did not cancel it
    // still fails that bound.
    let exchanger = exchanger(
      server, "/slow", parameters: ["delay": "30", "echo_id": echoID], timeout: .seconds(60),
      session: URLSession(configuration: .ephemeral))
    let task = Task { try await exchanger.exchange(makeCode(), for: request()) }
    // Blocks on the server until the slow request has arrived there: no sleeping in the test.
    let (status, _) = try await server.get("/arrived?id=\(echoID)&wait=45")
    #expect(status == 200)
    let cancelled = ContinuousClock.now
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    #expect(ContinuousClock.now - cancelled < .seconds(20))
  }

  @Test("a Task cancelled before the exchange starts throws CancellationError")
  func cancellationBeforeStart() async throws {
    let server = try TokenServer.running()
    let exchanger = exchanger(server, "/ok")
    let task = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await exchanger.exchange(makeCode(), for: request())
    }
    await #expect(throws: CancellationError.self) { try await task.value }
  }
}

extension Result {
  fileprivate var failureValue: Failure? {
    if case .failure(let error) = self { return error }
    return nil
  }
}

/// A token endpoint that redirects: the first server answers 3xx with a `Location` on the second
/// server (another port, so another origin). The exchanger must send nothing there.
@Suite("HTTPTokenExchanger refuses redirects", .timeLimit(.minutes(5)))
struct HTTPTokenExchangerRedirectTests {
  struct Redirect: Sendable, CustomTestStringConvertible {
    var status: Int
    var encoding: HTTPTokenExchanger.Encoding
    var testDescription: String { "\(status) with \(encoding)" }
  }

  static let redirects = [302, 307, 308].flatMap { status in
    HTTPTokenExchanger.Encoding.allCases.map { Redirect(status: status, encoding: $0) }
  }

  static let bearer = "BEARER-SECRET-\(UUID().uuidString.prefix(8))"

  /// The endpoint `/redirect` on `server`, answering `status` with a `Location` on `other`
  /// that carries `marker`.
  static func redirectingEndpoint(
    _ server: TokenServer, to other: TokenServer, status: Int, marker: String
  ) -> URL {
    let target = other.url("/ok?leak_id=\(marker)").absoluteString
    return server.url(
      "/redirect?status=\(status)&to=\(HTTPTokenExchanger.formEncode(target))")
  }

  /// The requests `server` received that carry `marker`, the bearer token or the auth code.
  static func leaks(on server: TokenServer, marker: String, code: AuthCode) async throws
    -> [String]
  {
    let secrets = [marker, bearer, code.value, HTTPTokenExchanger.formEncode(code.value)]
    return try await server.receivedRequests().map { "\($0)" }
      .filter { text in secrets.contains { text.contains($0) } }
  }

  @Test("a redirect to another origin is refused and nothing reaches it", arguments: redirects)
  func refusesCrossOriginRedirect(_ redirect: Redirect) async throws {
    let server = try TokenServer.running()
    let other = try TokenServer.runningSecondary()
    let marker = UUID().uuidString
    let code = makeCode()
    let exchanger = HTTPTokenExchanger(
      endpoint: Self.redirectingEndpoint(
        server, to: other, status: redirect.status, marker: marker),
      encoding: redirect.encoding, headers: ["Authorization": "Bearer \(Self.bearer)"],
      now: { fixedNow })

    let outcome: Result<AuthModel, any Error>
    do {
      outcome = .success(try await exchanger.exchange(code, for: request()))
    } catch {
      outcome = .failure(error)
    }

    // The redirect really was offered (the first server saw the request)...
    let offered = try await server.receivedRequests().filter {
      ($0["path"] as? String) == "/redirect" && "\($0)".contains(marker)
    }
    #expect(offered.count == 1)
    // ...and the other origin got nothing: no bearer header, no auth code, no request at all.
    let leaked = try await Self.leaks(on: other, marker: marker, code: code)
    #expect(leaked.isEmpty, "the redirect target received: \(leaked)")
    // The other host's token is not accepted as the user's model.
    if case .success(let model) = outcome {
      Issue.record("the redirect target's reply was accepted as \(model.uid)'s model")
    }
    let error = try #require(outcome.failureValue as? AuthCoordinatorError)
    let cause = try redactedCause(of: error, code: code)
    #expect(cause.code == .redirectRefused)
    #expect(cause.statusCode == redirect.status)
  }

  @Test("the fixture can see a leak: a plain URLSession follows the redirect to the other server")
  func fixtureDetectsAFollowedRedirect() async throws {
    let server = try TokenServer.running()
    let other = try TokenServer.runningSecondary()
    let marker = UUID().uuidString
    let url = Self.redirectingEndpoint(server, to: other, status: 307, marker: marker)
    let session = URLSession(configuration: .ephemeral)
    defer { session.finishTasksAndInvalidate() }
    let (_, response) = try await session.data(from: url)
    #expect((response as? HTTPURLResponse)?.statusCode == 200)
    let seen = try await other.receivedRequests().filter { "\($0)".contains(marker) }
    #expect(seen.count == 1)
  }

  @Test(
    "allowing same-origin HTTPS redirects still refuses plain HTTP and other ports",
    arguments: [302, 307, 308])
  func sameOriginFlagRefusesHTTPAndOtherPorts(_ status: Int) async throws {
    let server = try TokenServer.running()
    let other = try TokenServer.runningSecondary()
    for target in [server, other] {
      let marker = UUID().uuidString
      let code = makeCode()
      let exchanger = HTTPTokenExchanger(
        endpoint: Self.redirectingEndpoint(server, to: target, status: status, marker: marker),
        encoding: .postForm, headers: ["Authorization": "Bearer \(Self.bearer)"],
        allowsSameOriginHTTPSRedirects: true, now: { fixedNow })
      let cause = try await failure(exchanger, code: code)
      #expect(cause.code == .redirectRefused)
      let followed = try await target.receivedRequests().filter {
        ($0["path"] as? String) == "/ok" && "\($0)".contains(marker)
      }
      #expect(followed.isEmpty)
    }
  }

  @Test("only same-scheme, same-host, same-port HTTPS targets may be followed when asked")
  func redirectPolicy() throws {
    let endpoint = try #require(URL(string: "https://api.example.com/alipay/token"))
    let allowing = RedirectPolicy(endpoint: endpoint, allowsSameOriginHTTPS: true)
    let refusing = RedirectPolicy(endpoint: endpoint, allowsSameOriginHTTPS: false)
    let cases: [(String, Bool)] = [
      ("https://api.example.com/alipay/token/v2", true),
      ("https://API.EXAMPLE.COM:443/other?x=1", true),
      ("http://api.example.com/alipay/token", false),
      ("https://api.example.com:8443/alipay/token", false),
      ("https://evil.example.com/alipay/token", false),
      ("https://api.example.com.evil.net/alipay/token", false),
      ("https://user:pass@api.example.com/alipay/token", false),
    ]
    for (text, allowed) in cases {
      let url = try #require(URL(string: text))
      #expect(allowing.allowsRedirect(to: url) == allowed, "\(text)")
      #expect(!refusing.allowsRedirect(to: url), "\(text)")
    }
    let plain = try #require(URL(string: "http://127.0.0.1:8080/token"))
    let samePlain = try #require(URL(string: "http://127.0.0.1:8080/other"))
    let otherPort = try #require(URL(string: "http://127.0.0.1:8081/token"))
    let http = RedirectPolicy(endpoint: plain, allowsSameOriginHTTPS: true)
    #expect(!http.allowsRedirect(to: samePlain))
    #expect(RedirectPolicy.sameOrigin(plain, samePlain))
    #expect(!RedirectPolicy.sameOrigin(plain, otherPort))
  }
}
