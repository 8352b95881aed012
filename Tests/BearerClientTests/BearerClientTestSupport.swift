import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A rotating token server, a coordinator whose authorizer does real grants at it, and a
/// bearer client on its own URLSession: everything one test needs, its counts its own.
struct BearerHarness {
  let server: RotatingTokenServer
  let coordinator: AuthCoordinator
  let key = AccountKey(account: "u1")
  let session: URLSession
  let client: BearerClient

  /// Runs after each successful grant, before the model is returned to the coordinator: it may
  /// revoke tokens at the server or return another model.
  typealias AfterGrant =
    @Sendable (AuthorizationRequest, AuthModel, RotatingTokenServer) async throws -> AuthModel

  /// - Parameters:
  ///   - connections: The client session's `httpMaximumConnectionsPerHost`.
  ///   - rejectedStatuses: The client's rejected statuses.
  ///   - afterGrant: The authorizer's hook.
  init(
    connections: Int = 32, rejectedStatuses: Set<Int> = [401], afterGrant: AfterGrant? = nil
  ) throws {
    let server = try RotatingTokenServer(hardTimeout: 600)
    self.server = server
    coordinator = AuthCoordinator(
      authorizer: ClosureAuthorizer { request in
        let model = try await Self.grant(request, at: server)
        guard let afterGrant else { return model }
        return try await afterGrant(request, model, server)
      })
    let configuration = URLSessionConfiguration.ephemeral
    configuration.httpMaximumConnectionsPerHost = connections
    configuration.timeoutIntervalForRequest = 120
    session = URLSession(configuration: configuration)
    client = BearerClient(
      coordinator: coordinator, key: key, origin: server.baseURL, session: session,
      rejectedStatuses: rejectedStatuses)
  }

  /// The server's protected resource.
  var resource: URL { server.url("/resource") }

  /// A client-credentials grant, or a refresh-token grant when the request replaces a model
  /// with a refresh token, at the server's `/token` (plain form POSTs).
  static func grant(
    _ request: AuthorizationRequest, at server: RotatingTokenServer
  ) async throws -> AuthModel {
    var form = ["grant_type": "client_credentials"]
    if let refreshToken = request.replacing?.refreshToken {
      form = ["grant_type": "refresh_token", "refresh_token": refreshToken]
    }
    let (status, reply) = try await server.token(form)
    guard status == 200, let accessToken = reply["access_token"] as? String else {
      throw AuthCoordinatorError.terminal(nil, "the grant was answered \(status)")
    }
    let expiresIn = (reply["expires_in"] as? NSNumber)?.doubleValue ?? 3600
    return AuthModel(
      uid: reply["user_id"] as? String ?? "", accessToken: accessToken, mcUid: request.key.account,
      expiresAt: Date().addingTimeInterval(expiresIn),
      refreshToken: reply["refresh_token"] as? String)
  }

  /// The access token the coordinator holds now (a cache hit after a first request).
  func currentToken() async throws -> String {
    try await coordinator.authModel(for: key).accessToken
  }

  /// Sends `count` requests for the resource, all started together.
  ///
  /// - Returns: The statuses, and the wall time of the whole batch.
  func concurrentRequests(_ count: Int) async throws -> (statuses: [Int], elapsed: Duration) {
    let client = client
    let resource = resource
    let clock = ContinuousClock()
    let start = clock.now
    let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
      for _ in 0..<count {
        group.addTask {
          let (_, response) = try await client.data(from: resource)
          return response.statusCode
        }
      }
      var statuses: [Int] = []
      for try await status in group { statuses.append(status) }
      return statuses
    }
    return (statuses, clock.now - start)
  }
}
