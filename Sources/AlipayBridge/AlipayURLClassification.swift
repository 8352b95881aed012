import AuthCoordinator

/// The kind of a URL the app was opened with, as ``AlipayCallbackRouter`` routes it.
///
/// Pure and dependency-free apart from ``SafepayCallback``, so the fuzz target can compile it.
enum AlipayURLClassification: Equatable {
  /// Not an Alipay URL.
  case notOurs
  /// An Inside SDK account-connect URL: the app's scheme, and a host whose last labels are
  /// `inside.com` (`account.inside.com`, not `x.inside.com.evil.net`).
  case accountConnect
  /// An auth-result candidate: the app's scheme and the host exactly `safepay`; parsed or not.
  case safepay(Result<SafepayCallback, SafepayCallback.ParseFailure>)
  /// A URL the vendor's payment rule hands to the payment SDK (its host contains `safepay`) that
  /// is not an auth-result URL of this app (a lookalike host such as `evil-safepay.example`, or
  /// another scheme): forwarded untouched, never read as an auth result.
  case paymentPassThrough
}

extension SafepayCallback {
  /// Classifies the text of a URL the app was opened with.
  ///
  /// - Parameters:
  ///   - urlString: The URL text.
  ///   - appSchemes: The app's own URL schemes, lowercased; `nil` accepts any scheme.
  /// - Returns: Its classification; never traps.
  static func classify(_ urlString: String, appSchemes: Set<String>?) -> AlipayURLClassification {
    let authority = host(of: urlString)
    let ownScheme =
      appSchemes.map { schemes in
        scheme(of: urlString).map { schemes.contains($0) } ?? false
      } ?? true
    if ownScheme, isInsideHost(authority) { return .accountConnect }
    if ownScheme, isSafepayHost(authority) { return .safepay(parse(urlString)) }
    if authority.lowercased().contains("safepay") { return .paymentPassThrough }
    return .notOurs
  }

  /// The scheme of a URL text, lowercased: what precedes `://`, when it is a valid scheme
  /// (a letter, then letters, digits, `+`, `-` or `.`).
  static func scheme(of urlString: String) -> String? {
    guard let separator = urlString.range(of: "://") else { return nil }
    let scheme = urlString[..<separator.lowerBound]
    guard let first = scheme.unicodeScalars.first, first.isASCII, first.properties.isAlphabetic,
      scheme.unicodeScalars.allSatisfy({
        $0.isASCII
          && ($0.properties.isAlphabetic || ("0"..."9").contains($0)
            || "+-.".unicodeScalars.contains($0))
      })
    else { return nil }
    return scheme.lowercased()
  }

  /// Whether an authority is an Inside SDK host: a host name (letters, digits, `-`, no user
  /// info) whose last two labels are `inside`.`com`, with at least one label before them and
  /// no empty label, optionally followed by `:<port>`.
  static func isInsideHost(_ authority: Substring) -> Bool {
    var host = Substring(authority.lowercased())
    if let colon = host.lastIndex(of: ":") {
      let port = host[host.index(after: colon)...]
      guard !port.isEmpty, port.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
      host = host[..<colon]
    }
    guard host.hasSuffix(".inside.com") else { return false }
    let labels = host.split(separator: ".", omittingEmptySubsequences: false)
    return labels.count >= 3
      && labels.allSatisfy { label in
        !label.isEmpty
          && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
      }
  }
}
