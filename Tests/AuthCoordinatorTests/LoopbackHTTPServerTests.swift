import AuthCoordinatorTestKit
import Foundation
import Testing

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#endif

/// The TestKit's `LoopbackHTTPServer` under requests a test server meets from a misbehaving
/// client: a header or body past its limits, a chunked body, a client that goes away mid-body.
/// Each is refused or dropped, and the server keeps answering.
@Suite(.timeLimit(.minutes(1))) struct LoopbackHTTPServerTests {
  /// ``blockingExchange(_:_:finish:)`` on a thread of its own: the socket calls block, and a
  /// blocked thread of the concurrency pool (two on two cores) would starve the server's
  /// handler task and every other test running meanwhile.
  static func exchange(_ url: URL, _ bytes: [UInt8], finish: Bool = true) async throws -> String {
    try await withCheckedThrowingContinuation { continuation in
      let thread = Thread {
        continuation.resume(with: Result { try blockingExchange(url, bytes, finish: finish) })
      }
      thread.start()
    }
  }

  /// Sends `bytes` on a fresh connection to `url`'s port (closing the write side when
  /// `finish`), and returns what the server answered (empty when it answered nothing).
  static func blockingExchange(_ url: URL, _ bytes: [UInt8], finish: Bool = true) throws
    -> String
  {
    #if canImport(Darwin)
      let fd = socket(AF_INET, SOCK_STREAM, 0)
    #else
      let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #endif
    guard fd >= 0 else { throw SocketError(call: "socket") }
    defer { close(fd) }
    // A server that never answers fails the exchange instead of holding its thread.
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(url.port!).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard connected == 0 else { throw SocketError(call: "connect") }
    var sent = 0
    while sent < bytes.count {
      #if canImport(Darwin)
        let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
      #else
        let count = bytes[sent...].withUnsafeBytes {
          send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
        }
      #endif
      if count <= 0 { break }  // the server closed early (it refused the request)
      sent += count
    }
    guard finish else { return "" }
    #if canImport(Darwin)
      shutdown(fd, SHUT_WR)
    #else
      shutdown(fd, Int32(SHUT_WR))
    #endif
    var answer = [UInt8]()
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = recv(fd, &chunk, chunk.count, 0)
      if count <= 0 { break }
      answer += chunk[0..<count]
    }
    return String(decoding: answer, as: UTF8.self)
  }

  static func request(_ head: String, body: [UInt8] = []) -> [UInt8] {
    Array(head.utf8) + body
  }

  @Test func requestsPastTheLimitsAreRefusedAndTheServerGoesOnAnswering() async throws {
    let served = LockedCounter()
    let server = LoopbackHTTPServer(maxHeaderSize: 1024, maxBodySize: 100) { request in
      served.increment()
      return LoopbackHTTPResponse(status: 200, body: Data("ok \(request.body.count)".utf8))
    }
    let url = try server.start()
    defer { server.stop() }
    let ok = try await Self.exchange(
      url, Self.request("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n", body: Array("hello".utf8)))
    #expect(ok.hasPrefix("HTTP/1.1 200") && ok.hasSuffix("ok 5"))
    let longHeader = "POST /x HTTP/1.1\r\nX-Pad: \(String(repeating: "a", count: 2000))\r\n\r\n"
    #expect(try await Self.exchange(url, Self.request(longHeader)).hasPrefix("HTTP/1.1 431"))
    let bigBody = "POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n"
    #expect(
      try await Self.exchange(url, Self.request(bigBody, body: Array(repeating: 1, count: 101)))
        .hasPrefix("HTTP/1.1 413"))
    let chunked = "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    #expect(try await Self.exchange(url, Self.request(chunked)).hasPrefix("HTTP/1.1 411"))
    #expect(try await Self.exchange(url, Self.request("GARBAGE\r\n\r\n")).hasPrefix("HTTP/1.1 400"))
    let badLength = "POST /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n"
    #expect(try await Self.exchange(url, Self.request(badLength)).hasPrefix("HTTP/1.1 400"))
    // A client that promises 50 bytes, sends 10 and goes away: nothing to answer, no crash.
    _ = try await Self.exchange(
      url,
      Self.request(
        "POST /x HTTP/1.1\r\nContent-Length: 50\r\n\r\n", body: Array(repeating: 2, count: 10)))
    // Still serving, and only the two complete requests reached the handler.
    let again = try await Self.exchange(url, Self.request("GET /y HTTP/1.1\r\n\r\n"))
    #expect(again.hasPrefix("HTTP/1.1 200") && again.hasSuffix("ok 0"))
    #expect(served.value == 2)
  }

  /// A socket call of the test's client failed.
  struct SocketError: Error {
    let call: String
  }

  /// Counts from any thread.
  final class LockedCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    var value: Int { lock.withLock { count } }
    func increment() { lock.withLock { count += 1 } }
  }
}
