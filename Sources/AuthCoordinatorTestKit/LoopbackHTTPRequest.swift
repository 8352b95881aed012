import Foundation

/// One request a ``LoopbackHTTPServer`` received.
public struct LoopbackHTTPRequest: Sendable {
  /// The method, such as `POST`.
  public var method: String
  /// The path without the query, such as `/gateway.do`.
  public var path: String
  /// The query (after `?`), or `""`.
  public var query: String
  /// The headers, names lowercased (a repeated header keeps its last value).
  public var headers: [String: String]
  /// The body (its `Content-Length` bytes).
  public var body: Data

  /// Creates a request.
  ///
  /// - Parameters:
  ///   - method: The method.
  ///   - path: The path.
  ///   - query: The query.
  ///   - headers: The headers, names lowercased.
  ///   - body: The body.
  public init(
    method: String, path: String, query: String = "", headers: [String: String] = [:],
    body: Data = Data()
  ) {
    self.method = method
    self.path = path
    self.query = query
    self.headers = headers
    self.body = body
  }
}
