import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

/// An `expires_in` no real token lives for (1e300 seconds) is cut to a century, so the model
/// stays storable.
@Suite(.timeLimit(.minutes(2))) struct ExchangerExpiresInRangeTests {
  @Test func aLifetimeBeyondACenturyIsCutToOne() throws {
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    let exchanger = HTTPTokenExchanger(
      endpoint: URL(string: "https://127.0.0.1:9/token")!, now: { now })
    let body = Data(#"{"user_id":"2088","access_token":"t","expires_in":1e300}"#.utf8)
    let model = try exchanger.model(
      from: body, status: 200, code: AuthCode("code"), key: AccountKey(account: "u1"))
    let expiresAt = try #require(model.expiresAt)
    #expect(expiresAt == now.addingTimeInterval(Duration.saturationLimit.seconds))
  }
}
