import Foundation

/// Builds secret-free excerpts of HTTP reply bodies: the Alipay exchanger's `TokenExchangeError`
/// and the OAuth 2 authorizer's error messages carry them.
///
/// The excerpt is taken from a window of the body much larger than the excerpt itself, redacted
/// there, and only then cut: a secret that starts inside the excerpt is replaced whole, so no
/// prefix of it survives the cut.
package enum BodyRedaction {
  /// What a secret is replaced with.
  package static let marker = "<redacted>"
  /// How much of the body is redacted before the excerpt is cut.
  package static let window = 16 * 1024

  /// Values after these keys are redacted whatever they are: `"access_token": "..."`,
  /// `accessToken=...`, `auth_code: ...`, `"token": "..."` and the like.
  private static let keyedValue =
    #"(?i)((?:access|refresh)_?token|auth_?code|\btoken)("?\s*[:=]\s*"?)([^"&,;}<>\s]+)"#

  /// The default excerpt length, in characters (the Alipay exchanger's
  /// `TokenExchangeError.maxExcerptLength`).
  package static let defaultExcerptLength = 200

  /// A redacted excerpt of `body`, or `nil` when the body is empty.
  ///
  /// - Parameters:
  ///   - body: The reply body.
  ///   - secrets: Values known to be secret (the auth code, a decoded token); each is replaced
  ///     as is, percent-encoded and JSON-escaped.
  ///   - maxLength: The most characters kept; ``defaultExcerptLength`` by default.
  /// - Returns: At most `maxLength` characters of the redacted body.
  package static func excerpt(
    of body: Data, secrets: [String], maxLength: Int = defaultExcerptLength
  ) -> String? {
    guard !body.isEmpty else { return nil }
    let text = String(decoding: body.prefix(window), as: UTF8.self)
    return String(redact(text, secrets: secrets).prefix(maxLength))
  }

  /// `text` with every secret and every keyed token value replaced by ``marker``.
  ///
  /// - Parameters:
  ///   - text: Any text.
  ///   - secrets: Values known to be secret.
  /// - Returns: The redacted text.
  package static func redact(_ text: String, secrets: [String]) -> String {
    var result = text
    for variant in variants(of: secrets) {
      result = result.replacingOccurrences(of: variant, with: marker)
    }
    guard let expression = try? NSRegularExpression(pattern: keyedValue) else {
      preconditionFailure("Internal inconsistency: the redaction pattern does not compile")
    }
    let range = NSRange(result.startIndex..., in: result)
    return expression.stringByReplacingMatches(
      in: result, range: range,
      withTemplate: "$1$2"
        + NSRegularExpression.escapedTemplate(
          for: marker))
  }

  /// Each secret as is, percent-encoded (as in a query or form) and JSON-escaped, longest first.
  private static func variants(of secrets: [String]) -> [String] {
    var all = Set<String>()
    for secret in secrets where !secret.isEmpty {
      all.insert(secret)
      if let encoded = secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) {
        all.insert(encoded)
      }
      all.insert(secret.replacingOccurrences(of: "/", with: #"\/"#))
    }
    return all.sorted { $0.count > $1.count }
  }
}
