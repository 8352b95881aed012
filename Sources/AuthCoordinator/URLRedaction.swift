import Foundation

/// The library's one way to show a URL to people: in a description, an error message or a
/// text that may quote one (an underlying error's description).
///
/// Scheme, host, port and path stay, so the text still says where a request went. User info
/// and the fragment become `<redacted>`, and so does every query value (a query item without
/// `=` is replaced whole): auth codes, tokens and client secrets travel there. Query names stay.
///
///     https://<redacted>@api.example.com:8443/token?code=<redacted>&v=<redacted>#<redacted>
package enum URLRedaction {
  private static let pattern = try! NSRegularExpression(
    pattern: #"[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>(){}\[\],;]+"#)

  /// `url` redacted.
  package static func redacted(_ url: URL) -> String { redacted(url.absoluteString) }

  /// The URL in `text` redacted; `<redacted URL>` when `text` does not parse as a URL.
  package static func redacted(_ text: String) -> String {
    guard let parts = URLComponents(string: text), let scheme = parts.scheme else {
      return "<redacted URL>"
    }
    var shown = scheme + ":"
    if let host = parts.percentEncodedHost {
      shown += "//"
      if parts.percentEncodedUser != nil || parts.percentEncodedPassword != nil {
        shown += "<redacted>@"
      }
      shown += host
      if let port = parts.port { shown += ":\(port)" }
    }
    shown += parts.percentEncodedPath
    if let query = parts.percentEncodedQuery {
      let items = query.split(separator: "&", omittingEmptySubsequences: false).map { item in
        guard let equals = item.firstIndex(of: "=") else { return "<redacted>" }
        return "\(item[..<equals])=<redacted>"
      }
      shown += "?" + items.joined(separator: "&")
    }
    if parts.percentEncodedFragment != nil { shown += "#<redacted>" }
    return shown
  }

  /// `text` with every URL in it redacted.
  package static func redactingURLs(in text: String) -> String {
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
}
