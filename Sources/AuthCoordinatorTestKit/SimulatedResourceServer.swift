import AuthCoordinatorOAuth2
import Foundation
import SyncPrimitives

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// A SIMULATION of an API that takes bearer tokens, in process: an
/// ``/AuthCoordinatorOAuth2/HTTPTransport`` for a real `BearerClient`, with no socket.
///
/// It answers 200 for a request whose `Authorization: Bearer …` holds an access token the
/// ``SimulatedTokenServer`` says is active, and 401 with `WWW-Authenticate: Bearer
/// error="invalid_token"` for a missing, revoked, unknown or expired one, at once (no latency
/// is modelled). ``revokeAllAccessTokens()`` stands for a key rotation or an incident: refresh
/// tokens stay valid, so a client recovers with one refresh.
public final class SimulatedResourceServer: HTTPTransport, @unchecked Sendable {
  /// The server's counters.
  public struct Counters: Sendable, Equatable {
    /// Requests answered 200.
    public var ok = 0
    /// Requests answered 401.
    public var unauthorized = 0
    /// Calls of ``SimulatedResourceServer/revokeAllAccessTokens()``.
    public var revocations = 0

    /// All zero.
    public init() {}
  }

  /// The token server that issued the tokens this API accepts.
  public let tokenServer: SimulatedTokenServer
  private let state = LockedState(Counters())

  /// Creates an API that accepts what `tokenServer` issued.
  ///
  /// - Parameter tokenServer: The server whose active access tokens are accepted.
  public init(tokenServer: SimulatedTokenServer) {
    self.tokenServer = tokenServer
  }

  /// The counters so far.
  public var counters: Counters { state.withLock { $0 } }

  /// Answers one API request.
  ///
  /// - Parameter request: The request; its `Authorization: Bearer …` header is checked.
  /// - Returns: 200 with a small JSON body, or 401 with `WWW-Authenticate`.
  /// - Throws: `CancellationError` when the calling task is cancelled.
  public func send(_ request: HTTPTransportRequest) async throws -> HTTPTransportOutcome {
    try Task.checkCancellation()
    let header = request.urlRequest.value(forHTTPHeaderField: "Authorization") ?? ""
    let token = header.hasPrefix("Bearer ") ? String(header.dropFirst(7)) : ""
    let active = !token.isEmpty && tokenServer.status(of: token) == .active
    state.withLock { counters in
      if active {
        counters.ok += 1
      } else {
        counters.unauthorized += 1
      }
    }
    if active {
      return .complete(
        SimulatedTokenServer.response(
          to: request.urlRequest, status: 200, contentType: "application/json"),
        Data(#"{"ok":true}"#.utf8))
    }
    return .complete(
      SimulatedTokenServer.response(
        to: request.urlRequest, status: 401, contentType: "application/json",
        headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#]),
      Data(#"{"error":"invalid_token"}"#.utf8))
  }

  /// Revokes every access token issued so far (refresh tokens stay valid).
  ///
  /// - Returns: How many active access tokens were revoked.
  @discardableResult public func revokeAllAccessTokens() -> Int {
    state.withLock { $0.revocations += 1 }
    return tokenServer.revokeAccessTokens()
  }
}
