import AuthCoordinator
import Foundation
import HTTPSupport
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

  /// `url` with its user info, every query value and its fragment replaced by `<redacted>`.
  static func redacted(_ url: URL) -> String { URLRedaction.redacted(url) }
}
