import AuthCoordinator
import Foundation
import RotatingTokenServer
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md's hand-written refresh-token authorizer, copied verbatim between the markers (a test compares
/// the two), run against the rotating token server: one new family, then only refresh grants,
/// each spending the refresh token the previous one returned.
@Suite(.serialized, .timeLimit(.minutes(1))) struct ReadmeRefreshingAuthorizerTests {
  // --- from Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md ---
  struct RefreshingAuthorizer: Authorizer {
    let endpoint: URL
    let clientID: String

    func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
      var form = ["client_id": clientID, "grant_type": "client_credentials"]
      if let refreshToken = request.replacing?.refreshToken {
        form["grant_type"] = "refresh_token"
        form["refresh_token"] = refreshToken
      }
      var post = URLRequest(url: endpoint)
      post.httpMethod = "POST"
      post.setValue("application/x-www-form-urlencoded", forHTTPHeaderField: "Content-Type")
      post.httpBody = Data(
        form.map {
          "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)"
        }
        .joined(separator: "&").utf8)
      let (data, response) = try await URLSession.shared.data(for: post)
      guard (response as? HTTPURLResponse)?.statusCode == 200 else {
        throw AuthCoordinatorError(.authorizationFailed, "the token endpoint refused the grant")
      }
      struct Reply: Decodable {
        let access_token: String, refresh_token: String?, expires_in: Double
      }
      let reply = try JSONDecoder().decode(Reply.self, from: data)
      return AuthModel(
        uid: clientID, accessToken: reply.access_token, mcUid: request.key.account,
        expiresAt: Date().addingTimeInterval(reply.expires_in),
        refreshToken: reply.refresh_token ?? request.replacing?.refreshToken)
    }
  }
  // --- end ---

  @Test func theReadmesAuthorizerRefreshesWithRotationAndNeverReusesAToken() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    var configuration = AuthCoordinator.Configuration()
    configuration.maxForcedAuthorizations = 100  // 20 forced refreshes in a second, on purpose
    let coordinator = AuthCoordinator(
      authorizer: RefreshingAuthorizer(endpoint: server.url("/token"), clientID: "readme"),
      configuration: configuration)
    let key = AccountKey(account: "service")
    var token = try await coordinator.authModel(for: key).accessToken
    for _ in 0..<20 {
      let fresh = try await coordinator.authModel(for: key, refresh: .force(rejecting: token))
      #expect(fresh.accessToken != token)
      #expect(fresh.refreshToken != nil)
      token = fresh.accessToken
    }
    let stats = try await server.stats()
    #expect(stats.refreshes == 20)
    #expect(stats.reuses == 0)
    #expect(stats.revokedFamilies == 0)
  }

  @Test func theSnippetIsThePages() throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let page = try String(
      contentsOf: root.appendingPathComponent(
        "Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md"),
      encoding: .utf8)
    let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
    let begin = try #require(
      source.range(
        of:
          "// --- from Sources/AuthCoordinator/Documentation.docc/SharingOneAuthorizationAcrossProcesses.md ---\n"
      ))
    let end = try #require(source.range(of: "  // --- end ---"))
    let copied = source[begin.upperBound..<end.lowerBound]
      .split(separator: "\n", omittingEmptySubsequences: false)
      .map { $0.hasPrefix("  ") ? $0.dropFirst(2) : $0 }.joined(separator: "\n")
    #expect(page.contains(copied.trimmingCharacters(in: .newlines)))
  }
}
