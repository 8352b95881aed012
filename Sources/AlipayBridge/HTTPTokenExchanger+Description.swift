import AuthCoordinator
import Foundation
#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

extension HTTPTokenExchanger: CustomStringConvertible, CustomDebugStringConvertible,
  CustomReflectable
{
  /// A summary without secrets: header and parameter **names** only, and the endpoint with its
  /// user info, query values and fragment replaced by `<redacted>`, such as
  /// `HTTPTokenExchanger(endpoint: https://api.example.com/token?key=<redacted>, encoding:
  /// postForm, ..., parameters: [app_id], headers: [Authorization], ...)`.
  public var description: String {
    let parts = [
      "endpoint: \(Self.redacted(endpoint))", "encoding: \(encoding.rawValue)",
      "codeParameter: \(codeParameter)", "mcUidParameter: \(mcUidParameter)",
      "parameters: \(parameters.keys.sorted())", "headers: \(headers.keys.sorted())",
      "timeout: \(timeout)", "maxBodySize: \(maxBodySize)",
      "allowsSameOriginHTTPSRedirects: \(allowsSameOriginHTTPSRedirects)",
    ]
    return "HTTPTokenExchanger(\(parts.joined(separator: ", ")))"
  }

  /// The same as ``description``: header values stay hidden in debug output too.
  public var debugDescription: String { description }

  /// A reflection with the same redactions as ``description``, so `dump(exchanger)` shows no
  /// header value, parameter value or endpoint credential.
  public var customMirror: Mirror {
    Mirror(
      self,
      children: [
        "endpoint": Self.redacted(endpoint), "encoding": encoding,
        "codeParameter": codeParameter, "mcUidParameter": mcUidParameter,
        "parameterNames": parameters.keys.sorted(), "headerNames": headers.keys.sorted(),
        "timeout": timeout, "maxBodySize": maxBodySize,
        "allowsSameOriginHTTPSRedirects": allowsSameOriginHTTPSRedirects,
      ],
      displayStyle: .struct)
  }

  /// `url` with its user info, every query value and its fragment replaced by `<redacted>`
  /// (a query item without `=` is replaced whole); scheme, host, port and path are kept.
  static func redacted(_ url: URL) -> String {
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
