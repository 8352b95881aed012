import AuthCoordinator
import Foundation
import Testing

@testable import AuthCoordinatorOAuth2

/// An `expires_in` no real token lives for (1e300 seconds) is cut to a century, so the model
/// stays storable; one that is not a number of seconds (`"inf"`) is refused.
@Suite(.timeLimit(.minutes(2))) struct ExpiresInRangeTests {
  private let now = Date(timeIntervalSince1970: 1_800_000_000)

  private var clock: OAuth2Authorizer.ReplyClock {
    .init(
      sentAt: now,
      request: AuthorizationRequest(
        key: AccountKey(account: "u1"), reason: .missing, requestID: "1"))
  }

  private func authorizer() -> OAuth2Authorizer {
    let now = self.now
    return OAuth2Authorizer(
      tokenEndpoint: URL(string: "https://127.0.0.1:9/token")!, clientID: "c", now: { now })
  }

  @Test func aLifetimeBeyondACenturyIsCutToOne() throws {
    let model = try authorizer().model(
      from: ["access_token": "t", "expires_in": 1e300], form: .clientCredentials,
      key: AccountKey(account: "u1"), clock: clock)
    let expiresAt = try #require(model.expiresAt)
    #expect(expiresAt == now.addingTimeInterval(Duration.saturationLimit.seconds))
  }

  @Test(arguments: ["inf", "nan", "-1"])
  func aLifetimeThatIsNotANumberOfSecondsIsRefused(_ text: String) {
    #expect(throws: AuthCoordinatorError.self) {
      try authorizer().model(
        from: ["access_token": "t", "expires_in": text], form: .clientCredentials,
        key: AccountKey(account: "u1"), clock: clock)
    }
  }

  @Test(arguments: ["soon", "-5", "1e20"])
  func anAbsoluteExpiryThatIsNotATimeIsRefused(_ text: String) {
    #expect(throws: AuthCoordinatorError.self) {
      try authorizer().model(
        from: ["access_token": "t", "expires_at": text], form: .clientCredentials,
        key: AccountKey(account: "u1"), clock: clock)
    }
  }
}
