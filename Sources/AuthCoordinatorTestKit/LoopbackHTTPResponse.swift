import Foundation

/// What a ``LoopbackHTTPServer``'s handler answers.
public struct LoopbackHTTPResponse: Sendable {
  /// The status, such as 200.
  public var status: Int
  /// The headers (`Content-Length` and `Connection: close` are added by the server).
  public var headers: [String: String]
  /// The body.
  public var body: Data

  /// Creates a response.
  ///
  /// - Parameters:
  ///   - status: The status.
  ///   - headers: The headers.
  ///   - body: The body.
  public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
    self.status = status
    self.headers = headers
    self.body = body
  }
}
