/// The kind of a URL the app was opened with, as ``AlipayCallbackRouter`` routes it.
///
/// Pure and dependency-free apart from ``SafepayCallback``, so the fuzz target can compile it.
enum AlipayURLClassification: Equatable {
  /// Not an Alipay URL.
  case notOurs
  /// An Inside SDK account-connect URL (the host contains `.inside.com`).
  case accountConnect
  /// A `safepay` URL, parsed or not.
  case safepay(Result<SafepayCallback, SafepayCallback.ParseFailure>)
}

extension SafepayCallback {
  /// Classifies the text of a URL the app was opened with.
  ///
  /// - Parameter urlString: The URL text.
  /// - Returns: Its classification; never traps.
  static func classify(_ urlString: String) -> AlipayURLClassification {
    let host = host(of: urlString).lowercased()
    if host.contains(".inside.com") { return .accountConnect }
    guard isSafepayHost(Substring(host)) else { return .notOurs }
    return .safepay(parse(urlString))
  }
}
