import Foundation

/// Endpoint URLs as a description may show them.
package enum URLDisplay {
  /// `url` with its user info, every query value and its fragment replaced by `<redacted>`
  /// (a query item without `=` is replaced whole); scheme, host, port and path are kept.
  ///
  /// - Parameter url: An endpoint URL.
  /// - Returns: The URL's text without credentials, query values or fragment.
  package static func redacted(_ url: URL) -> String {
    guard let parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else {
      return "<redacted URL>"
    }
    var text = parts.scheme.map { $0 + ":" } ?? ""
    if let host = parts.percentEncodedHost {
      text += "//"
      if parts.percentEncodedUser != nil || parts.percentEncodedPassword != nil {
        text += "<redacted>@"
      }
      text += host
      if let port = parts.port { text += ":\(port)" }
    }
    text += parts.percentEncodedPath
    if let query = parts.percentEncodedQuery {
      let items = query.split(separator: "&", omittingEmptySubsequences: false).map { item in
        guard let equals = item.firstIndex(of: "=") else { return "<redacted>" }
        return "\(item[..<equals])=<redacted>"
      }
      text += "?" + items.joined(separator: "&")
    }
    if parts.percentEncodedFragment != nil { text += "#<redacted>" }
    return text
  }
}
