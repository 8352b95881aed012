import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

@Suite(.timeLimit(.minutes(2))) struct InsideResultTests {
  @Test(arguments: [
    ("account_open_auth_8000", AuthCoordinatorError.Code.authorizationFailed),
    ("account_open_auth_6000", .userCancelled),
    ("account_open_auth_5000", .abandoned),
    ("account_open_auth_4002", .alipayTooOld),
    ("account_open_auth_1234", .authorizationFailed),
    ("9000", .authorizationFailed),
    ("", .authorizationFailed),
  ])
  func failureCodes(code: String, expected: AuthCoordinatorError.Code) {
    let result = InsideResult(code: code, fields: ["auth_code": "SECRET", "state": "s1"])
    #expect(throws: AuthCoordinatorError(expected)) { try result.outcome.get() }
    #expect(result.requestID == "s1")
  }

  @Test func successCarriesCodeAppIDAndState() throws {
    let result = InsideResult(
      code: "account_open_auth_9000",
      fields: ["auth_code": "SECRET", "app_id": "2021", "state": "s1"])
    let code = try result.outcome.get()
    #expect(code.value == "SECRET")
    #expect(code.appID == "2021")
    #expect(result.requestID == "s1")
    #expect(!String(describing: result).contains("SECRET"))
  }

  @Test func successWithoutStateHasNoRequestID() throws {
    let result = InsideResult(code: "account_open_auth_9000", fields: ["auth_code": "SECRET"])
    #expect(result.requestID == nil)
    #expect(try result.outcome.get().value == "SECRET")
  }

  @Test func successWithoutAuthCodeFails() {
    let result = InsideResult(code: "account_open_auth_9000", fields: ["state": "s1"])
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try result.outcome.get() }
  }

  @Test func missingCodeFails() {
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) {
      try InsideResult(code: nil).outcome.get()
    }
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) {
      try InsideResult([:]).outcome.get()
    }
  }

  @Test func dictionaryWithDefaultAndCustomKeys() throws {
    let nested: [AnyHashable: Any] = ["auth_code": "SECRET", "state": "s2", "app_id": 2021]
    let standard = InsideResult(["resultCode": "account_open_auth_9000", "result": nested])
    #expect(try standard.outcome.get().appID == "2021")
    #expect(standard.requestID == "s2")
    let custom = InsideResult(
      ["ANXCode": "account_open_auth_6000", "ANXResult": ["state": "s3"]],
      codeKey: "ANXCode", resultKey: "ANXResult")
    #expect(custom.code == .userCancelled)
    #expect(custom.requestID == "s3")
  }

  @Test func dictionaryWithUnknownKeysIsReadLiberally() throws {
    let result = InsideResult([
      "someCodeKey": "account_open_auth_9000",
      "someResultKey": ["auth_code": "SECRET", "state": "s4"] as [String: String],
      42: "ignored",
    ])
    #expect(result.code == .success)
    #expect(result.requestID == "s4")
    #expect(try result.outcome.get().value == "SECRET")
  }

  @Test func codeMappingTable() {
    #expect(InsideResult.Code.success.failureCode == nil)
    #expect(InsideResult.Code.failed.failureCode == .authorizationFailed)
    #expect(InsideResult.Code.userCancelled.failureCode == .userCancelled)
    #expect(InsideResult.Code.interrupted.failureCode == .abandoned)
    #expect(InsideResult.Code.alipayTooOld.failureCode == .alipayTooOld)
  }
}
