import Foundation

/// One HTTP request to the integrator's Alipay endpoints, independent of any HTTP server:
/// adapt your server's request to it and call ``AlipayTokenService/respond(to:)``.
public struct AlipayServiceRequest: Sendable {
  /// The method, such as `POST`.
  public var method: String
  /// The path, such as `/alipay/refresh` (a query, if any, is ignored).
  public var path: String
  /// The headers; names compare case-insensitively.
  public var headers: [String: String]
  /// The body: a form (`application/x-www-form-urlencoded`) or a JSON object of strings.
  public var body: Data

  /// Creates a request.
  ///
  /// - Parameters:
  ///   - method: The method; `POST` by default.
  ///   - path: The path.
  ///   - headers: The headers.
  ///   - body: The body.
  public init(
    method: String = "POST", path: String, headers: [String: String] = [:], body: Data = Data()
  ) {
    self.method = method
    self.path = path
    self.headers = headers
    self.body = body
  }

  /// The value of a header, whatever the case of its name.
  ///
  /// - Parameter name: The header's name.
  /// - Returns: Its value, or `nil`.
  public func header(_ name: String) -> String? {
    headers.first { $0.key.lowercased() == name.lowercased() }?.value
  }

  /// The body's fields: a JSON object (when the `Content-Type` says JSON, or the body starts
  /// with `{`) whose string or number values are kept, or a URL-encoded form. `nil` when the
  /// body is neither.
  public var fields: [String: String]? {
    let type = header("Content-Type")?.lowercased() ?? ""
    let trimmed = body.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }
    if type.contains("json") || trimmed.first == UInt8(ascii: "{") {
      guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
        return nil
      }
      var fields: [String: String] = [:]
      for (name, value) in object {
        if let text = value as? String {
          fields[name] = text
        } else if let number = value as? NSNumber, String(cString: number.objCType) != "c" {
          fields[name] = number.stringValue
        }
      }
      return fields
    }
    guard let text = String(data: body, encoding: .utf8) else { return nil }
    var fields: [String: String] = [:]
    for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
      let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
      func decode(_ part: Substring) -> String? {
        part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
      }
      guard let name = decode(parts[0]) else { return nil }
      fields[name] = parts.count > 1 ? decode(parts[1]) : ""
    }
    return fields
  }
}
