import Foundation

/// The answer of ``AlipayTokenService/respond(to:)``: a status, headers and a JSON body, for
/// any HTTP server to send.
public struct AlipayServiceResponse: Sendable, Equatable {
  /// The HTTP status.
  public var status: Int
  /// The headers: `Content-Type: application/json; charset=utf-8`, `Cache-Control: no-store`
  /// and, for a 503 whose wait is known, `Retry-After`.
  public var headers: [String: String]
  /// The JSON body.
  public var body: Data

  /// Creates a response.
  ///
  /// - Parameters:
  ///   - status: The HTTP status.
  ///   - headers: The headers.
  ///   - body: The body.
  public init(status: Int, headers: [String: String], body: Data) {
    self.status = status
    self.headers = headers
    self.body = body
  }

  /// A JSON response with the standard headers.
  ///
  /// - Parameters:
  ///   - status: The HTTP status.
  ///   - object: The JSON object: strings and integers.
  ///   - extraHeaders: More headers (a `Retry-After`).
  /// - Returns: The response.
  static func json(
    _ status: Int, _ object: [String: any Sendable], extraHeaders: [String: String] = [:]
  ) -> AlipayServiceResponse {
    let body =
      (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]))
      ?? Data("{}".utf8)
    var headers = [
      "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store",
    ]
    headers.merge(extraHeaders) { _, new in new }
    return AlipayServiceResponse(status: status, headers: headers, body: body)
  }

  /// The body as a JSON object, or `nil` when it is not one.
  public var json: [String: Any]? {
    (try? JSONSerialization.jsonObject(with: body)) as? [String: Any]
  }
}
