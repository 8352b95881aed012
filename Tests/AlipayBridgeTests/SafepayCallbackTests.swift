import AuthCoordinator
import Foundation
import Testing

@testable import AlipayBridge

@Suite(.timeLimit(.minutes(2))) struct SafepayCallbackTests {
  @Test func successNeedsStatus9000AndResultCode200AndAuthCode() throws {
    let callback = try SafepayCallback(url: Callback.success("req-1"))
    #expect(callback.kind == .auth)
    #expect(callback.resultStatus == .success)
    #expect(callback.resultCode == "200")
    #expect(callback.requestID == "req-1")
    let code = try callback.outcome.get()
    #expect(code.value == "AUTHCODE-SECRET-1")
    #expect(code.appID == "2021000000000001")
    #expect(code.userID == "2088000000000001")
  }

  @Test func status9000WithOtherResultCodeFails() throws {
    for resultCode in ["202", "", "0", "2000"] {
      let result = Callback.authResult(resultCode: resultCode, targetID: "r")
      let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
      #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try callback.outcome.get() }
    }
  }

  @Test func status9000WithoutResultCodeFails() throws {
    let result = Callback.authResult(resultCode: nil, targetID: "r")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.kind == .auth)
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try callback.outcome.get() }
  }

  @Test func resultCode200WithoutStatus9000Fails() throws {
    let result = Callback.authResult(targetID: "r")
    let callback = try SafepayCallback(
      url: Callback.safepay(Callback.payload(status: "8000", result: result)))
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try callback.outcome.get() }
  }

  @Test func successWithoutAuthCodeFails() throws {
    let result = Callback.authResult(code: nil, targetID: "r")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.kind == .auth)
    #expect(!callback.hasAuthCode)
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try callback.outcome.get() }
    let empty = Callback.authResult(code: "", targetID: "r")
    let emptyCallback = try SafepayCallback(
      url: Callback.safepay(Callback.payload(result: empty)))
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try emptyCallback.outcome.get() }
  }

  @Test func successFalseFails() throws {
    let result = Callback.authResult(targetID: "r", success: "false")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(throws: AuthCoordinatorError(.authorizationFailed)) { try callback.outcome.get() }
  }

  @Test(arguments: [
    ("8000", AuthCoordinatorError.Code.authorizationFailed),
    ("4000", .authorizationFailed),
    ("5000", .authorizationFailed),
    ("6001", .userCancelled),
    ("6002", .networkError),
    ("6004", .authorizationFailed),
    ("1234", .authorizationFailed),
    ("", .authorizationFailed),
    ("9001", .authorizationFailed),
  ])
  func resultStatusMapping(status: String, expected: AuthCoordinatorError.Code) throws {
    // Even with result_code 200 and an auth code, only 9000 succeeds.
    let result = Callback.authResult(targetID: "r")
    let callback = try SafepayCallback(
      url: Callback.safepay(Callback.payload(status: status, result: result)))
    #expect(SafepayResultStatus(rawValue: status).failureCode == expected)
    #expect(throws: AuthCoordinatorError(expected)) { try callback.outcome.get() }
  }

  @Test func status9000HasNoFailureCode() {
    #expect(SafepayResultStatus.success.failureCode == nil)
    #expect(SafepayResultStatus(rawValue: " \"9000\" ") == .success)
    #expect(SafepayResultStatus.userCancelled.description == "6001 (user cancelled)")
  }

  @Test func quotedValuesAreStripped() throws {
    let result = Callback.authResult(code: "Q-CODE", targetID: "req-q", quoted: true)
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.requestID == "req-q")
    #expect(callback.resultCode == "200")
    #expect(try callback.outcome.get().value == "Q-CODE")
    #expect(try callback.outcome.get().appID == "2021000000000001")
  }

  @Test func stateIsTheRequestIDWhenTargetIDIsAbsent() throws {
    let result = Callback.authResult(state: "st-1")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.requestID == "st-1")
    #expect(callback.targetID == nil)
  }

  @Test func conflictingIDsNameNoRequest() throws {
    let result = Callback.authResult(targetID: "a", state: "b")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.hasConflictingRequestIDs)
    #expect(callback.requestID == nil)
    let same = Callback.authResult(targetID: "a", state: "a")
    let sameCallback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: same)))
    #expect(sameCallback.requestID == "a")
  }

  @Test func jsonInAQueryItemIsRead() throws {
    let payload = Callback.payload(result: Callback.authResult(targetID: "item"))
    let url = URL(string: "demoapp://safepay/?foo=bar&result=\(Callback.encode(payload))")!
    #expect(try SafepayCallback(url: url).requestID == "item")
  }

  @Test func memoAsJSONStringAndNumericStatusAreRead() throws {
    let memo = Callback.json(["result": Callback.authResult(targetID: "m"), "ResultStatus": 9000])
    let payload = Callback.json(["memo": memo, "requestType": "safepay"])
    let callback = try SafepayCallback(url: Callback.safepay(payload))
    #expect(callback.resultStatus == .success)
    #expect(try callback.outcome.get().value == "AUTHCODE-SECRET-1")
  }

  @Test func flatPayloadIsRead() throws {
    let payload = Callback.json([
      "result": Callback.authResult(targetID: "f"), "ResultStatus": "9000",
    ])
    #expect(try SafepayCallback(url: Callback.safepay(payload)).requestID == "f")
  }

  @Test func unencodedJSONInTextIsRead() throws {
    let payload = Callback.payload(result: Callback.authResult(targetID: "raw"))
    let callback = try SafepayCallback(urlString: "demoapp://safepay/?\(payload)")
    #expect(callback.requestID == "raw")
  }

  @Test func paymentResultIsNotAnAuthResult() throws {
    let callback = try SafepayCallback(url: Callback.payment())
    #expect(callback.kind == .payment)
    #expect(callback.requestID == nil)
    #expect(throws: AuthCoordinatorError(.invalidCallback)) { try callback.outcome.get() }
  }

  @Test func authRequestTypeMakesAnAuthResult() throws {
    let payload = Callback.payload(status: "6001", result: "", requestType: "auth_V2")
    let callback = try SafepayCallback(url: Callback.safepay(payload))
    #expect(callback.kind == .auth)
    #expect(throws: AuthCoordinatorError(.userCancelled)) { try callback.outcome.get() }
  }

  @Test(arguments: [
    "demoapp://other/?x=1",
    "demoapp://safepay/",
    "demoapp://safepay/?",
    "demoapp://safepay/?%7B%22memo%22%3A%ZZ",
    "demoapp://safepay/?%7Bnot json%7D",
    "demoapp://safepay/?%5B1%2C2%5D",
    "demoapp://safepay/?%7B%22requestType%22%3A%22safepay%22%7D",
    "not a url at all",
    "",
  ])
  func malformedURLsThrowInvalidCallback(text: String) {
    #expect(throws: AuthCoordinatorError(.invalidCallback)) {
      try SafepayCallback(urlString: text)
    }
  }

  @Test func authResultWithoutStatusIsMalformed() {
    let payload = Callback.json(["memo": ["result": Callback.authResult(targetID: "r")]])
    #expect(throws: AuthCoordinatorError(.invalidCallback)) {
      try SafepayCallback(url: Callback.safepay(payload))
    }
    #expect(
      SafepayCallback.classify(
        Callback.safepay(payload).absoluteString, appSchemes: [Callback.scheme])
        == .safepay(.failure(.malformedAuth("the auth result has no ResultStatus"))))
  }

  @Test func repeatedAuthFieldsWithDifferentValuesAreMalformed() {
    let result = Callback.authResult(targetID: "r") + "&auth_code=OTHER"
    #expect(throws: AuthCoordinatorError(.invalidCallback)) {
      try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    }
  }

  @Test func hugeURLIsRejectedUnread() {
    let big = String(repeating: "a", count: SafepayCallback.maximumURLLength)
    let result = Callback.authResult(targetID: "r") + "&pad=\(big)"
    #expect(throws: AuthCoordinatorError(.invalidCallback)) {
      try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    }
  }

  @Test func descriptionsAndErrorsNeverShowTheAuthCode() throws {
    let secret = "AUTHCODE-SECRET-1"
    let success = try SafepayCallback(url: Callback.success("r"))
    #expect(!String(describing: success).contains(secret))
    #expect(!String(reflecting: success).contains(secret))
    #expect(!String(describing: success.outcome).contains(secret))
    for status in ["4000", "6001", "6002", "8000"] {
      let result = Callback.authResult(code: secret, targetID: "r")
      let failure = try SafepayCallback(
        url: Callback.safepay(Callback.payload(status: status, result: result)))
      #expect(!String(describing: failure.outcome).contains(secret))
    }
    let repeated = Callback.authResult(code: secret, targetID: "r") + "&auth_code=OTHER"
    do {
      _ = try SafepayCallback(url: Callback.safepay(Callback.payload(result: repeated)))
    } catch {
      #expect(!String(describing: error).contains(secret))
    }
  }

  /// Found by the callback fuzzer: a garbled `target_id` that repeats the auth code showed the
  /// code in the description.
  @Test func theDescriptionNeverShowsTheCodeEvenInsideAnotherField() throws {
    let secret = "AUTHCODE-SECRET-9"
    let result = Callback.authResult(code: secret, targetID: "r%26auth_code^3D\(secret)")
    let callback = try SafepayCallback(url: Callback.safepay(Callback.payload(result: result)))
    #expect(callback.hasAuthCode)
    #expect(!callback.description.contains(secret), "\(callback.description)")
    #expect(callback.description.contains("<redacted>"))
  }
}
