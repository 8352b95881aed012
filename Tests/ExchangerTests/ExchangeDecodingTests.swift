import AuthCoordinator
import Foundation
import HTTPSupport
import Testing

@testable import AlipayBridge

@Suite("Reply decoding and redaction", .timeLimit(.minutes(2)))
struct ExchangeDecodingTests {
  private func decode(_ json: String) throws(TokenExchangeResponse.Failure)
    -> TokenExchangeResponse
  {
    try TokenExchangeResponse.decode(Data(json.utf8))
  }

  @Test func envelopeWithNumericUserIDAndStringExpiry() throws {
    let reply = try decode(
      #"{"alipay_system_oauth_token_response":{"user_id":2088000000000001,"#
        + #""access_token":"t","expires_in":" 60 "},"mc_user_id":"m"}"#)
    #expect(reply.userID == "2088000000000001")
    #expect(reply.expiresIn == 60)
    #expect(reply.mcUserID == "m")
  }

  /// 0 and 1 are numbers on every platform (swift-corelibs-foundation bridges them to `Bool`);
  /// `true` is not.
  @Test(arguments: [0, 1])
  func zeroAndOneAreNumbers(_ value: Int) throws {
    let reply = try decode(
      #"{"user_id":\#(value),"access_token":"t","expires_in":\#(value),"mc_user_id":\#(value)}"#)
    #expect(reply.userID == "\(value)")
    #expect(reply.expiresIn == TimeInterval(value))
    #expect(reply.mcUserID == "\(value)")
  }

  @Test func aBooleanUserIDIsInvalid() {
    #expect(throws: TokenExchangeResponse.Failure.self) {
      try decode(#"{"user_id":true,"access_token":"t"}"#)
    }
  }

  @Test func flatCamelWinsOverSnake() throws {
    let reply = try decode(#"{"userId":"a","user_id":"b","accessToken":"t","expiresIn":1.5}"#)
    #expect(reply.userID == "a")
    #expect(reply.expiresIn == 1.5)
    #expect(reply.mcUserID == nil)
  }

  @Test(arguments: [
    #"{"user_id":"a","access_token":"t","expires_in":"soon"}"#,
    #"{"user_id":"a","access_token":"t","expires_in":-1}"#,
    #"{"user_id":"a","access_token":"t","expires_in":true}"#,
    #"{"user_id":{"x":1},"access_token":"t"}"#,
    #"{"alipay_system_oauth_token_response":"nope"}"#,
    #"[1,2]"#, "", "null",
  ])
  func invalid(_ json: String) {
    #expect(throws: TokenExchangeResponse.Failure.self) { try decode(json) }
    do {
      _ = try decode(json)
    } catch {
      #expect(error.code == .invalidJSON)
    }
  }

  @Test func emptyValuesAreMissing() {
    do {
      _ = try decode(#"{"user_id":"a","access_token":"  "}"#)
      Issue.record("decoded an empty token")
    } catch {
      #expect(error.code == .missingField)
      #expect(error.field == "access_token")
    }
  }

  @Test func redactsCodeVariantsAndKeyedTokens() {
    let code = "ab+c/d=e"
    let text =
      #"{"x":"ab+c/d=e","y":"ab%2Bc%2Fd%3De","z":"ab+c\/d=e","accessToken":"T1","#
      + #""refresh_token": "R2"} access_token=T3&token=T4"#
    let redacted = BodyRedaction.redact(text, secrets: [code])
    for secret in ["ab+c", "ab%2B", "T1", "R2", "T3", "T4"] {
      #expect(!redacted.contains(secret), "\(secret) in \(redacted)")
    }
    #expect(redacted.contains(#""accessToken":"<redacted>""#))
  }

  @Test func excerptIsCutAfterRedaction() {
    let token = String(repeating: "S", count: 500)
    let body = Data((String(repeating: "p", count: 190) + "\"access_token\":\"\(token)\"").utf8)
    let excerpt = BodyRedaction.excerpt(of: body, secrets: [])
    #expect(excerpt?.count == TokenExchangeError.maxExcerptLength)
    #expect(excerpt?.contains("S") == false)
    #expect(BodyRedaction.excerpt(of: Data(), secrets: []) == nil)
  }

  @Test func errorsCompareByCode() {
    #expect(TokenExchangeError(.httpStatus, statusCode: 500) == TokenExchangeError(.httpStatus))
    #expect(TokenExchangeError(.httpStatus) != TokenExchangeError(.timedOut))
    let long = TokenExchangeError(.invalidJSON, bodyExcerpt: String(repeating: "x", count: 900))
    #expect(long.bodyExcerpt?.count == 200)
  }
}
