import Foundation

/// Takes the secrets out of the URLs in a text meant for people: user info, query and fragment
/// (where auth codes, tokens and client secrets travel) are dropped; scheme, host, port and path
/// stay, so the text still says where a request went.
enum URLRedaction {
  private static let pattern = try! NSRegularExpression(
    pattern: #"[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>(){}\[\],;]+"#)

  /// `text` with every URL in it redacted.
  static func redactingURLs(in text: String) -> String {
    let whole = NSRange(text.startIndex..., in: text)
    let matches = pattern.matches(in: text, range: whole)
    guard !matches.isEmpty else { return text }
    var result = text
    for match in matches.reversed() {
      guard let range = Range(match.range, in: result) else { continue }
      result.replaceSubrange(range, with: redacted(String(result[range])))
    }
    return result
  }

  /// One URL without its user info, query and fragment; a mark says what was dropped.
  static func redacted(_ url: String) -> String {
    guard let schemeEnd = url.range(of: "://") else { return "<redacted URL>" }
    let scheme = url[..<schemeEnd.lowerBound]
    var rest = url[schemeEnd.upperBound...]
    var dropped = false
    if let cut = rest.firstIndex(where: { $0 == "?" || $0 == "#" }) {
      rest = rest[..<cut]
      dropped = true
    }
    // User info ends at the last "@" before the path.
    let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
    if let at = rest[..<authorityEnd].lastIndex(of: "@") {
      rest = rest[rest.index(after: at)...]
      dropped = true
    }
    return "\(scheme)://\(rest)" + (dropped ? "<redacted>" : "")
  }
}
