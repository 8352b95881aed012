import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

// SIMULATED TOKEN ENDPOINT, REAL HTTP: every test runs the real OAuth2Authorizer (URLSession,
// HTTPSupport's limits, real JSON parsing) against its own RotatingTokenServer, a python3
// stand-in for an OAuth 2 authorization server on 127.0.0.1.

/// The account every test authorizes.
let serviceKey = AccountKey(account: "reports-service")

/// A request for ``serviceKey``, replacing `model` when given.
func request(replacing model: AuthModel? = nil, interactive: Bool = true) -> AuthorizationRequest {
  AuthorizationRequest(
    key: serviceKey, reason: model == nil ? .missing : .expired,
    requestID: UUID().uuidString, replacing: model, allowsInteraction: interactive)
}

/// An expired model that holds `refreshToken`, as the store would hand it to a refresh.
func expiredModel(refreshToken: String) -> AuthModel {
  AuthModel(
    uid: "", accessToken: "at-expired", mcUid: serviceKey.account,
    expiresAt: Date(timeIntervalSince1970: 0), refreshToken: refreshToken)
}

/// An authorizer for `server`'s token endpoint, with a short timeout so no test hangs.
func authorizer(
  _ server: RotatingTokenServer, clientID: String = "reports", secret: String? = nil,
  authentication: OAuth2Authorizer.ClientAuthentication? = nil,
  grant: OAuth2Authorizer.Grant = .clientCredentials, fallback: Bool? = nil,
  timeout: Duration = .seconds(5), refreshTimeout: Duration = .seconds(30),
  maxBodySize: Int = 1 << 20, now: @escaping @Sendable () -> Date = { Date() }
) -> OAuth2Authorizer {
  OAuth2Authorizer(
    tokenEndpoint: server.url("/token"), clientID: clientID, clientSecret: secret,
    clientAuthentication: authentication, primaryGrant: grant, fallbackOnInvalidGrant: fallback,
    timeout: timeout, refreshTimeout: refreshTimeout, maxBodySize: maxBodySize, now: now)
}

/// The `AuthCoordinatorError` that `body` throws; records an issue when it returns or throws
/// something else.
func coordinatorError(
  sourceLocation: SourceLocation = #_sourceLocation,
  _ body: () async throws -> AuthModel
) async -> AuthCoordinatorError? {
  do {
    let model = try await body()
    Issue.record("expected an error, got \(model)", sourceLocation: sourceLocation)
  } catch let error as AuthCoordinatorError {
    return error
  } catch {
    Issue.record("expected an AuthCoordinatorError, got \(error)", sourceLocation: sourceLocation)
  }
  return nil
}

/// Scripts the server's next `count` token answers as `status` with `body`.
func script(
  _ server: RotatingTokenServer, status: Int, body: String, count: Int = 1
) async throws {
  try await server.configure([
    "fail_count": "\(count)", "fail_status": "\(status)", "fail_body": body,
  ])
}

/// A loopback TCP port that refuses connections: a socket bound to it but not listening. Close
/// the returned descriptor when done.
func refusingPort() throws -> (port: Int, descriptor: Int32) {
  #if canImport(Glibc)
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
  #else
    let descriptor = socket(AF_INET, SOCK_STREAM, 0)
  #endif
  guard descriptor >= 0 else { throw POSIXError(.EBADF) }
  var address = sockaddr_in()
  address.sin_family = sa_family_t(AF_INET)
  address.sin_addr.s_addr = inet_addr("127.0.0.1")
  address.sin_port = 0
  var length = socklen_t(MemoryLayout<sockaddr_in>.size)
  let bound = withUnsafeMutablePointer(to: &address) { pointer in
    pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
      bind(descriptor, raw, length) == 0 && getsockname(descriptor, raw, &length) == 0
    }
  }
  guard bound else {
    close(descriptor)
    throw POSIXError(.EADDRNOTAVAIL)
  }
  return (Int(UInt16(bigEndian: address.sin_port)), descriptor)
}

/// A wall clock tests move by hand (the coordinator's `configuration.now` and the authorizer's
/// `now`).
final class TestDate: @unchecked Sendable {
  private let lock = NSLock()
  private var value: Date

  init(_ start: Date = Date(timeIntervalSince1970: 1_800_000_000)) { value = start }

  var date: Date { lock.withLock { value } }

  var source: @Sendable () -> Date { { [self] in self.date } }

  func advance(by seconds: TimeInterval) { lock.withLock { value += seconds } }
}
