// libFuzzer target for the Alipay callback parsers. Built by scripts/fuzz-callback.sh together
// with the parser sources from Sources/AlipayBridge and the stubs in Stubs.swift, on top of an
// `AuthCoordinator` module made of the core's error type and the stubs in Core/Stubs.swift.
//
// Each input is read as the text of a URL the app was opened with. It goes through the URL
// classifier and the safepay parser (as text and as a Foundation URL), the result is checked
// for the parser's invariants, and the bytes are also read as a JSON dictionary for
// InsideResult. Any crash, sanitizer report or broken invariant stops the fuzzer.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCallbackParser(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
  let bytes = UnsafeBufferPointer(start: data, count: size)
  let text = String(decoding: bytes, as: UTF8.self)

  check(SafepayCallback.classify(text, appSchemes: nil))
  check(SafepayCallback.classify(text, appSchemes: ["demoapp"]), appSchemes: ["demoapp"], text)
  if let callback = try? SafepayCallback(urlString: text) { check(callback) }
  if let url = URL(string: text) {
    _ = SafepayCallback.isSafepay(url)
    if let callback = try? SafepayCallback(url: url) { check(callback) }
  }
  if let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] {
    let result = InsideResult(object)
    if case .success(let code) = result.outcome {
      precondition(!code.value.isEmpty, "an Inside success needs an auth code")
      precondition(result.code == .success, "only account_open_auth_9000 succeeds")
    }
    _ = result.description
  }
  return 0
}

private func check(_ classification: AlipayURLClassification) {
  if case .safepay(.success(let callback)) = classification { check(callback) }
}

/// With app schemes, only the app's scheme and the exact `safepay` host are ever parsed.
private func check(
  _ classification: AlipayURLClassification, appSchemes: Set<String>, _ text: String
) {
  check(classification)
  if case .safepay = classification {
    precondition(
      SafepayCallback.scheme(of: text).map(appSchemes.contains) == true,
      "an auth result is read only on the app's scheme")
    precondition(
      SafepayCallback.host(of: text).lowercased() == "safepay",
      "an auth result is read only from the exact safepay host")
  }
}

/// The parser's promises: success only on 9000 + 200 + auth code, never for a payment.
private func check(_ callback: SafepayCallback) {
  _ = callback.description
  _ = callback.requestID
  switch callback.outcome {
  case .success(let code):
    precondition(callback.kind == .auth, "a payment result never succeeds as auth")
    precondition(callback.resultStatus == .success, "success needs ResultStatus 9000")
    precondition(callback.resultCode == "200", "success needs result_code 200")
    precondition(!code.value.isEmpty, "success needs an auth code")
    precondition(
      !callback.description.contains(code.value) || code.value.count < 4,
      "the description must not show the auth code")
  case .failure(let error):
    precondition(error.code != .init(rawValue: ""), "errors carry a code")
  }
  if callback.hasConflictingRequestIDs {
    precondition(callback.requestID == nil, "conflicting ids name no request")
  }
}
