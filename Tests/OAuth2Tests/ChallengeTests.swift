import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// A token endpoint that refuses the client with 401 and a `WWW-Authenticate` challenge, as RFC
/// 6749 §5.2 and RFC 7617 (which requires the realm) have it: the authorizer sees the 401 at
/// once and reports `invalid_client`, terminal. On Linux a challenge with a realm used to stall
/// URLSession (swift-corelibs-foundation #5456) until the request's timeout, which then read as a
/// transient `network_error`, so a wrong secret was retried forever.
@Suite(.timeLimit(.minutes(5))) struct ChallengeTests {
  static let challenges = [
    #"Basic"#,
    #"Basic realm="rotating-token-server""#,
    #"Basic realm="token endpoint", charset="UTF-8""#,
    #"Bearer realm="api", error="invalid_token""#,
    #"Bearer realm="api", error="invalid_token", Basic realm="api""#,
    #"Negotiate, Basic realm="corp", Digest realm="corp", nonce="abc", qop="auth""#,
  ]

  @Test(arguments: challenges)
  func aRefusedClientIsInvalidClientAtOnceWhateverTheChallenge(_ challenge: String)
    async throws
  {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure([
      "client_id": "reports", "client_secret": "right", "token_challenge": challenge,
    ])
    // A timeout far above the bound below: a stall would show as a network_error after 60 s.
    let oauth = authorizer(
      server, secret: "wrong", authentication: .basic, timeout: .seconds(60))
    let started = ContinuousClock.now

    let error = await coordinatorError { try await oauth.authorize(request()) }

    let elapsed = ContinuousClock.now - started
    #expect(error?.code == .invalidClient, "\(String(describing: error))")
    #expect(error?.isTransient == false)
    // Real time is the property: the answer is there at once (milliseconds on a quiet
    // machine); the bound leaves a loaded one a wide margin and is far below the timeout.
    #expect(elapsed < .seconds(30))
    #expect(try await server.stats().invalidClients == 1)
  }
}
