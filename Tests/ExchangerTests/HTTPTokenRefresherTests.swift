import AuthCoordinator
import Foundation
import LoopbackTokenServer
import Testing

@testable import AlipayBridge

/// Issue 36, item 1: the app's silent refresh at the integrator's server, over real HTTP to
/// the python3 loopback server (`Resources/token_server.py`, which simulates the server's
/// answers): what it sends, and how each answer is classified.
@Suite(.timeLimit(.minutes(1))) struct HTTPTokenRefresherTests {
  let now = Date(timeIntervalSince1970: 1_800_000_000)
  let key = AccountKey(account: "merchant-1")

  func refresher(_ server: TokenServer, _ path: String) -> HTTPTokenRefresher {
    let now = self.now
    return HTTPTokenRefresher(endpoint: server.url(path), now: { now })
  }

  func request(_ reason: AuthorizationReason, replacing: AuthModel? = nil) -> AuthorizationRequest {
    AuthorizationRequest(key: key, reason: reason, requestID: "r1", replacing: replacing)
  }

  /// The error a refresh against `path` throws, checked to name no token.
  func failure(
    _ server: TokenServer, _ path: String, replacing: AuthModel? = nil,
    sourceLocation: SourceLocation = #_sourceLocation
  ) async throws -> AuthCoordinatorError {
    let error = try await #require(throws: AuthCoordinatorError.self) {
      _ = try await refresher(server, path).authorize(
        request(.forcedRefresh, replacing: replacing))
    }
    let text = "\(error) \(String(reflecting: error)) \(error.underlying.map { "\($0)" } ?? "")"
    #expect(!text.contains("rejected-secret"), "a token leaked: \(text)")
    return error
  }

  @Test func aForcedRefreshSendsTheUserAndTheRejectedTokenAndReadsTheModel() async throws {
    let server = try TokenServer.running()
    let echoID = UUID().uuidString
    var refresher = refresher(server, "/echo")
    refresher.parameters = ["echo_id": echoID, "mc_uid": "overridden"]
    let rejected = AuthModel(uid: "2088", accessToken: "rejected-secret", mcUid: "merchant-1")
    let model = try await refresher.authorize(request(.forcedRefresh, replacing: rejected))
    #expect(model.accessToken == TokenServer.token)
    #expect(model.mcUid == "merchant-1")
    #expect(model.refreshToken == nil, "no refresh token is ever kept in the app")
    let (_, record) = try await server.get("/record?id=\(echoID)")
    #expect(record["method"] as? String == "POST")
    let params = try #require(record["params"] as? [String: String])
    #expect(params["mc_uid"] == "merchant-1")
    #expect(params["rejected_access_token"] == "rejected-secret")
    // An expiry is no rejection: the token is not sent.
    let quiet = UUID().uuidString
    refresher.parameters = ["echo_id": quiet]
    _ = try await refresher.authorize(request(.expired, replacing: rejected))
    let (_, second) = try await server.get("/record?id=\(quiet)")
    let secondParams = try #require(second["params"] as? [String: String])
    #expect(secondParams["rejected_access_token"] == nil)
  }

  @Test func authorizationRequiredMeansTheUserMustActAndNothingElseDoes() async throws {
    let server = try TokenServer.running()
    let needsUser = try await failure(server, "/authorization-required")
    #expect(needsUser.code == .interactionRequired && !needsUser.isTransient)
    // Another 401 (the app's own session with its server expired, say) is not a bounce.
    let unauthorized = try await failure(server, "/unauthorized")
    #expect(unauthorized.code == .refreshFailed && !unauthorized.isTransient)
    let refused = try await failure(server, "/refused")
    #expect(refused.code == .refreshFailed && !refused.isTransient)
  }

  @Test func anOutageIsTransientWithTheServersRetryAfter() async throws {
    let server = try TokenServer.running()
    let rejected = AuthModel(uid: "2088", accessToken: "rejected-secret", mcUid: "merchant-1")
    let busy = try await failure(server, "/busy?retry_after=7", replacing: rejected)
    #expect(busy.code == .refreshFailed && busy.isTransient)
    #expect(busy.retryAfter == .seconds(7))
    let down = try await failure(server, "/500")
    #expect(down.code == .refreshFailed && down.isTransient)
    let unreachable = HTTPTokenRefresher(endpoint: URL(string: "http://127.0.0.1:9/refresh")!)
    let error = try await #require(throws: AuthCoordinatorError.self) {
      _ = try await unreachable.authorize(request(.expired))
    }
    #expect(error.isTransient)
  }

  @Test func aReplyForAnotherUserOrNotAModelIsRefused() async throws {
    let server = try TokenServer.running()
    let mismatch = try await failure(server, "/mismatch")
    #expect(mismatch.code == .refreshFailed)
    #expect((mismatch.underlying as? TokenExchangeError)?.code == .userMismatch)
    let garbage = try await failure(server, "/badjson")
    #expect(garbage.code == .refreshFailed && !garbage.isTransient)
  }
}
