import HTTPSupport

/// Makes server-supplied text (an `error_description`, an unknown error code, a token type) fit
/// for an error message: cut short, printable ASCII only, secrets and token-like values
/// replaced by `<redacted>`.
enum Sanitizer {
  /// The most characters of server text a message carries.
  static let maxLength = 200

  /// `text` redacted, with every character outside printable ASCII replaced by `?`, and cut to
  /// `maxLength` characters (with `...` when it was longer).
  ///
  /// - Parameters:
  ///   - text: The server's text.
  ///   - maxLength: The most characters kept.
  ///   - secrets: Values known to be secret (the client secret, the refresh token, the code).
  /// - Returns: The cleaned text.
  static func clean(_ text: String, maxLength: Int = maxLength, secrets: [String] = []) -> String {
    // Redacted before the cut (as in `BodyRedaction.excerpt`), so no prefix of a secret
    // survives it; the window bounds the work on a huge description.
    let window = String(text.prefix(BodyRedaction.window))
    let redacted = BodyRedaction.redact(window, secrets: secrets)
    let printable = String(
      String.UnicodeScalarView(
        redacted.unicodeScalars.map { (0x20...0x7E).contains($0.value) ? $0 : "?" }))
    guard printable.count > maxLength else { return printable }
    return String(printable.prefix(maxLength)) + "..."
  }
}
