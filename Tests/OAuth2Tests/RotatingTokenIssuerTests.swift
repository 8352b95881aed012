import AuthCoordinatorTestKit
import Foundation
import Testing

/// The rotation rules every simulated server here shares (``RotatingTokenIssuer``): each rule
/// is asserted on the value itself, so that a server built on it cannot drift.
@Suite struct RotatingTokenIssuerTests {
  let date = Date(timeIntervalSince1970: 1_800_000_000)
  let hour = Duration.seconds(3600)

  @Test func aRefreshRotatesAndSpendsTheOldToken() throws {
    var issuer = RotatingTokenIssuer()
    let first = issuer.startFamily(at: date, lifetime: hour)
    let next = try issuer.rotate(first.refreshToken, at: date, lifetime: hour).get()
    #expect(next.family == first.family)
    #expect(next.refreshToken != first.refreshToken)
    #expect(issuer.successor(of: first.refreshToken) == next.refreshToken)
    #expect(issuer.currentRefreshToken(ofFamily: first.family) == next.refreshToken)
    #expect(!issuer.isLive(first.refreshToken, at: date))
    #expect(issuer.isLive(next.refreshToken, at: date))
    #expect(issuer.counters.rotations == 1 && issuer.counters.families == 1)
    // Access tokens of a rotated family stay valid unless the issuer revokes them on rotation.
    #expect(issuer.status(ofAccessToken: first.accessToken, at: date) == .active)
  }

  @Test func aReuseRevokesTheWholeFamilyAndIsCounted() throws {
    var issuer = RotatingTokenIssuer()
    let first = issuer.startFamily(at: date, lifetime: hour)
    let other = issuer.startFamily(at: date, lifetime: hour)
    let next = try issuer.rotate(first.refreshToken, at: date, lifetime: hour).get()
    let refusal1 = issuer.rotate(first.refreshToken, at: date, lifetime: hour)
    #expect(refusal1 == .failure(.reused(family: first.family)))
    #expect(issuer.counters.reuses == 1 && issuer.counters.familiesRevoked == 1)
    #expect(issuer.isRevoked(family: first.family))
    #expect(issuer.status(ofAccessToken: next.accessToken, at: date) == .revoked)
    // The family's newest token is refused too, without counting another reuse.
    let refusal2 = issuer.rotate(next.refreshToken, at: date, lifetime: hour)
    #expect(refusal2 == .failure(.revoked(family: first.family)))
    #expect(issuer.counters.reuses == 1)
    // Another family is untouched.
    #expect(issuer.status(ofAccessToken: other.accessToken, at: date) == .active)
    let unaffected = try issuer.rotate(other.refreshToken, at: date, lifetime: hour).get()
    #expect(unaffected.family == other.family)
  }

  @Test func unknownTokensEndedFamiliesAndExpiredAccessTokensAreRefused() {
    var issuer = RotatingTokenIssuer()
    let refusal3 = issuer.rotate("nope", at: date, lifetime: hour)
    #expect(refusal3 == .failure(.unknown))
    let first = issuer.startFamily(at: date, lifetime: hour, familyLifetime: .seconds(7200))
    #expect(first.familyEndsAt == date.addingTimeInterval(7200))
    #expect(
      issuer.status(ofAccessToken: first.accessToken, at: date.addingTimeInterval(3600)) == .expired
    )
    #expect(issuer.status(ofAccessToken: "nope", at: date) == .unknown)
    let later = date.addingTimeInterval(7200)
    #expect(!issuer.isLive(first.refreshToken, at: later))
    let refusal4 = issuer.rotate(first.refreshToken, at: later, lifetime: hour)
    #expect(refusal4 == .failure(.familyEnded(family: first.family)))
    #expect(issuer.counters.refusals == 2 && issuer.counters.reuses == 0)
  }

  @Test func aRotationCanRevokeTheFamilysEarlierAccessTokens() throws {
    var issuer = RotatingTokenIssuer(rotationRevokesAccessTokens: true)
    let first = issuer.startFamily(at: date, lifetime: hour)
    let next = try issuer.rotate(first.refreshToken, at: date, lifetime: hour).get()
    #expect(issuer.status(ofAccessToken: first.accessToken, at: date) == .revoked)
    #expect(issuer.status(ofAccessToken: next.accessToken, at: date) == .active)
  }

  @Test func revocationTakesAFamilyByItsRefreshTokenOrOneAccessToken() throws {
    var issuer = RotatingTokenIssuer()
    let first = issuer.startFamily(at: date, lifetime: hour)
    let second = issuer.startFamily(at: date, lifetime: hour)
    let knewAccess = issuer.revoke(second.accessToken)
    #expect(knewAccess)
    #expect(issuer.status(ofAccessToken: second.accessToken, at: date) == .revoked)
    #expect(issuer.isLive(second.refreshToken, at: date), "an access token goes alone")
    let knewRefresh = issuer.revoke(first.refreshToken)
    #expect(knewRefresh)
    #expect(issuer.status(ofAccessToken: first.accessToken, at: date) == .revoked)
    let refusal5 = issuer.rotate(first.refreshToken, at: date, lifetime: hour)
    #expect(refusal5 == .failure(.revoked(family: 1)))
    let knewUnknown = issuer.revoke("unknown")
    #expect(!knewUnknown)
    #expect(issuer.counters.familiesRevoked == 0, "only reuses are counted")
    let active = issuer.revokeAllAccessTokens(at: date)
    #expect(active == 0, "both were revoked already")
  }

  /// The fleet demo keeps the issuer in a file its processes share.
  @Test func itSurvivesAnEncodingRoundTrip() throws {
    var issuer = RotatingTokenIssuer(accessTokenPrefix: "AT", refreshTokenPrefix: "RT")
    let first = issuer.startFamily(at: date, lifetime: hour, familyLifetime: .seconds(86_400))
    _ = try issuer.rotate(first.refreshToken, at: date, lifetime: hour).get()
    var decoded = try JSONDecoder().decode(
      RotatingTokenIssuer.self, from: JSONEncoder().encode(issuer))
    #expect(decoded == issuer)
    let refusal6 = decoded.rotate(first.refreshToken, at: date, lifetime: hour)
    #expect(refusal6 == .failure(.reused(family: first.family)))
    #expect(first.accessToken == "AT-1-1" && first.refreshToken == "RT-1-1")
  }
}
