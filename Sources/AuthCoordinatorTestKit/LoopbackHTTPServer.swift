import Foundation
import SyncPrimitives

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#endif

/// A minimal HTTP/1.1 server on 127.0.0.1, for tests: it serves a handler on a real loopback
/// socket, so that a real `URLSession` client (a `URLSessionTransport`) talks to it.
///
/// One request per connection (`Connection: close`), bodies by `Content-Length` only, at most
/// ``maxHeaderSize`` header bytes and ``maxBodySize`` body bytes (a larger request is answered
/// 413 or 431 and closed), a read timeout per connection, and no crash when a client
/// disconnects (writes never raise `SIGPIPE`). Each connection runs on a thread of its own; the
/// handler runs in a task.
///
/// ```swift
/// let server = LoopbackHTTPServer { request in
///   LoopbackHTTPResponse(status: 200, body: Data("hello".utf8))
/// }
/// let baseURL = try server.start()  // http://127.0.0.1:<ephemeral port>
/// defer { server.stop() }
/// ```
public final class LoopbackHTTPServer: Sendable {
  /// Answers one request.
  public typealias Handler = @Sendable (LoopbackHTTPRequest) async -> LoopbackHTTPResponse

  /// The most header bytes read from one request. Default 16 KiB.
  public let maxHeaderSize: Int
  /// The most body bytes accepted in one request. Default 1 MiB.
  public let maxBodySize: Int
  private let handler: Handler
  private let listener = LockedState<Int32>(-1)

  /// Why the server could not start.
  public struct StartError: Error, Sendable, CustomStringConvertible {
    /// The call that failed (`socket`, `bind`, `listen`, `getsockname`).
    public var call: String
    /// `errno` after it.
    public var errno: Int32
    /// `<call> failed: errno <n>`.
    public var description: String { "\(call) failed: errno \(errno)" }
  }

  /// Creates a stopped server.
  ///
  /// - Parameters:
  ///   - maxHeaderSize: The most header bytes read; 16 KiB by default.
  ///   - maxBodySize: The most body bytes accepted; 1 MiB by default.
  ///   - handler: Answers each request.
  public init(
    maxHeaderSize: Int = 16 * 1024, maxBodySize: Int = 1 << 20,
    handler: @escaping Handler
  ) {
    self.maxHeaderSize = maxHeaderSize
    self.maxBodySize = maxBodySize
    self.handler = handler
  }

  deinit { stop() }

  /// Starts listening on 127.0.0.1 at an ephemeral port.
  ///
  /// - Returns: The base URL, `http://127.0.0.1:<port>`.
  /// - Throws: ``StartError`` when the socket cannot be made.
  @discardableResult
  public func start() throws -> URL {
    #if canImport(Darwin)
      let fd = socket(AF_INET, SOCK_STREAM, 0)
    #else
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #endif
    guard fd >= 0 else { throw StartError(call: "socket", errno: errno) }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    #if canImport(Darwin)
      address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
    #endif
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = 0
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard bound == 0 else {
      let code = errno
      close(fd)
      throw StartError(call: "bind", errno: code)
    }
    guard listen(fd, 128) == 0 else {
      let code = errno
      close(fd)
      throw StartError(call: "listen", errno: code)
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else {
      let code = errno
      close(fd)
      throw StartError(call: "getsockname", errno: code)
    }
    let port = UInt16(bigEndian: address.sin_port)
    listener.withLock { $0 = fd }
    let thread = Thread { [self] in acceptLoop(fd) }
    thread.name = "LoopbackHTTPServer.accept"
    thread.start()
    return URL(string: "http://127.0.0.1:\(port)")!
  }

  /// Stops accepting connections (those already accepted finish). Safe to call twice.
  public func stop() {
    let fd = listener.withLock { fd in
      defer { fd = -1 }
      return fd
    }
    guard fd >= 0 else { return }
    #if canImport(Darwin)
      shutdown(fd, SHUT_RDWR)
    #else
      shutdown(fd, Int32(SHUT_RDWR))
    #endif
    close(fd)
  }

  private func acceptLoop(_ fd: Int32) {
    while true {
      let client = accept(fd, nil, nil)
      if client < 0 {
        if errno == EINTR { continue }
        return  // stopped
      }
      let thread = Thread { [self] in serve(client) }
      thread.name = "LoopbackHTTPServer.connection"
      thread.start()
    }
  }

  private func serve(_ client: Int32) {
    defer { close(client) }
    #if canImport(Darwin)
      var yes: Int32 = 1
      setsockopt(client, SOL_SOCKET, SO_NOSIGPIPE, &yes, socklen_t(MemoryLayout<Int32>.size))
    #endif
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    let response: LoopbackHTTPResponse
    switch readRequest(client) {
    case .success(let request):
      let box = ResponseBox()
      let done = DispatchSemaphore(value: 0)
      Task { [handler] in
        box.set(await handler(request))
        done.signal()
      }
      done.wait()
      response = box.get()
    case .failure(let failure):
      guard failure.status > 0 else { return }  // the client went away
      response = LoopbackHTTPResponse(status: failure.status)
    }
    write(response, to: client)
  }

  /// The request on `client`, or the status to refuse it with (0: nothing to answer).
  private func readRequest(_ client: Int32) -> Result<LoopbackHTTPRequest, RequestFailure> {
    var buffer = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 4096)
    let separator: [UInt8] = [13, 10, 13, 10]
    var headerEnd: Int?
    while headerEnd == nil {
      let count = recv(client, &chunk, chunk.count, 0)
      guard count > 0 else { return .failure(RequestFailure(0)) }
      buffer.append(contentsOf: chunk[0..<count])
      headerEnd = Self.find(separator, in: buffer)
      if headerEnd == nil, buffer.count > maxHeaderSize { return .failure(RequestFailure(431)) }
    }
    guard let headerEnd, headerEnd <= maxHeaderSize else { return .failure(RequestFailure(431)) }
    let head = String(decoding: buffer[0..<headerEnd], as: UTF8.self)
    var lines = head.components(separatedBy: "\r\n")
    let requestLine = lines.removeFirst().split(separator: " ")
    guard requestLine.count == 3 else { return .failure(RequestFailure(400)) }
    var headers: [String: String] = [:]
    for line in lines {
      guard let colon = line.firstIndex(of: ":") else { continue }
      headers[line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()] =
        line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    if headers["transfer-encoding"] != nil { return .failure(RequestFailure(411)) }
    let declared = headers["content-length"]
    guard let length = declared.map({ Int($0) }) ?? 0, length >= 0 else {
      return .failure(RequestFailure(400))  // a length that is not a number
    }
    guard length <= maxBodySize else { return .failure(RequestFailure(413)) }
    var body = Array(buffer[(headerEnd + 4)...])
    while body.count < length {
      let count = recv(client, &chunk, chunk.count, 0)
      guard count > 0 else { return .failure(RequestFailure(0)) }
      body.append(contentsOf: chunk[0..<count])
    }
    let target = String(requestLine[1])
    let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
    return .success(
      LoopbackHTTPRequest(
        method: String(requestLine[0]), path: String(parts[0]),
        query: parts.count > 1 ? String(parts[1]) : "", headers: headers,
        body: Data(body.prefix(length))))
  }

  private struct RequestFailure: Error {
    let status: Int
    init(_ status: Int) { self.status = status }
  }

  private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard haystack.count >= needle.count else { return nil }
    for start in 0...(haystack.count - needle.count)
    where haystack[start..<start + needle.count].elementsEqual(needle) {
      return start
    }
    return nil
  }

  private func write(_ response: LoopbackHTTPResponse, to client: Int32) {
    var head = "HTTP/1.1 \(response.status) \(Self.reason(response.status))\r\n"
    for (name, value) in response.headers
    where !["content-length", "connection"].contains(name.lowercased()) {
      head += "\(name): \(value)\r\n"
    }
    head += "Content-Length: \(response.body.count)\r\nConnection: close\r\n\r\n"
    let bytes = Array(head.utf8) + Array(response.body)
    var sent = 0
    while sent < bytes.count {
      #if canImport(Darwin)
        let count = bytes[sent...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, 0) }
      #else
        let count = bytes[sent...].withUnsafeBytes {
          send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
      #endif
      guard count > 0 else { return }  // the client went away
      sent += count
    }
  }

  private static func reason(_ status: Int) -> String {
    switch status {
    case 200: return "OK"
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 411: return "Length Required"
    case 413: return "Content Too Large"
    case 429: return "Too Many Requests"
    case 431: return "Request Header Fields Too Large"
    case 500: return "Internal Server Error"
    case 502: return "Bad Gateway"
    case 503: return "Service Unavailable"
    default: return "Status"
    }
  }
}

/// Hands a handler's response from its task to the connection's thread.
private final class ResponseBox: Sendable {
  private let value = LockedState<LoopbackHTTPResponse?>(nil)
  func set(_ response: LoopbackHTTPResponse) { value.withLock { $0 = response } }
  func get() -> LoopbackHTTPResponse {
    value.withLock { $0 } ?? LoopbackHTTPResponse(status: 500)
  }
}
