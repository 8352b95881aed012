import AuthCoordinatorOAuth2
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Cancellation of the calling task while its request is at the server.
@Suite(.timeLimit(.minutes(2))) struct BearerClientCancellationTests {
  /// A listener that reads the request and never answers: once it holds the request, the
  /// caller's task is cancelled; the call ends with `CancellationError` and the client closes
  /// the connection (the request was cancelled, not abandoned).
  @Test func cancellingTheCallerCancelsTheRequestInFlight() async throws {
    let harness = try BearerHarness()
    let token = try await harness.currentToken()
    let listener = try SilentListener()
    defer { listener.close() }
    let url = URL(string: "http://127.0.0.1:\(listener.port)/resource")!
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: url, session: harness.session)
    let clock = ContinuousClock()

    let call = Task { try await client.data(from: url) }
    let (connection, head) = try await listener.acceptRequest()
    #expect(head.contains("Authorization: Bearer \(token)"))
    let cancelledAt = clock.now
    call.cancel()

    await #expect(throws: CancellationError.self) { try await call.value }
    #expect(clock.now - cancelledAt < .seconds(10))
    #expect(await listener.waitForClose(connection, timeoutMilliseconds: 10_000))
  }

  /// Cancelled before it starts: nothing is sent.
  @Test func aCallerCancelledBeforeTheCallSendsNothing() async throws {
    let harness = try BearerHarness()
    _ = try await harness.currentToken()
    let client = harness.client
    let resource = harness.resource

    let call = Task {
      withUnsafeCurrentTask { $0?.cancel() }
      return try await client.data(from: resource)
    }

    await #expect(throws: CancellationError.self) { try await call.value }
    let stats = try await harness.server.stats()
    #expect(stats.resourceOK + stats.resourceUnauthorized == 0)
  }
}

/// A TCP listener on 127.0.0.1 that reads one request's head and never answers.
final class SilentListener: @unchecked Sendable {
  let port: Int
  private let socketDescriptor: Int32

  struct Failure: Error, CustomStringConvertible {
    var description: String
  }

  init() throws {
    #if canImport(Glibc)
      let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
      let descriptor = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard descriptor >= 0 else { throw Failure(description: "socket: \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
        bind(descriptor, address, length) == 0 && listen(descriptor, 4) == 0
          && getsockname(descriptor, address, &length) == 0
      }
    }
    guard bound else {
      _ = closeDescriptor(descriptor)
      throw Failure(description: "bind/listen: \(errno)")
    }
    socketDescriptor = descriptor
    port = Int(UInt16(bigEndian: address.sin_port))
  }

  /// Accepts one connection and reads until the end of the request head.
  ///
  /// - Returns: The connection and the head's text.
  func acceptRequest() async throws -> (Int32, String) {
    let descriptor = socketDescriptor
    return try await Self.onThread {
      let connection = accept(descriptor, nil, nil)
      guard connection >= 0 else { throw Failure(description: "accept: \(errno)") }
      var head = [UInt8]()
      var buffer = [UInt8](repeating: 0, count: 4096)
      while !String(decoding: head, as: UTF8.self).contains("\r\n\r\n") {
        let count = read(connection, &buffer, buffer.count)
        guard count > 0 else { throw Failure(description: "the client closed before its head") }
        head += buffer[0..<count]
      }
      return (connection, String(decoding: head, as: UTF8.self))
    }
  }

  /// Whether the peer closes `connection` within the timeout (a read returns end of file).
  func waitForClose(_ connection: Int32, timeoutMilliseconds: Int32) async -> Bool {
    (try? await Self.onThread {
      var entry = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
      guard poll(&entry, 1, timeoutMilliseconds) == 1 else { return false }
      var byte: UInt8 = 0
      let closed = read(connection, &byte, 1) <= 0
      _ = closeDescriptor(connection)
      return closed
    }) ?? false
  }

  func close() { _ = closeDescriptor(socketDescriptor) }

  /// Runs blocking socket calls on their own thread, off the cooperative pool.
  private static func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T)
    async throws -> T
  {
    try await withCheckedThrowingContinuation { continuation in
      Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
  }
}

/// `close(2)`, which `SilentListener.close()` shadows.
private func closeDescriptor(_ descriptor: Int32) -> Int32 {
  #if canImport(Glibc)
    Glibc.close(descriptor)
  #else
    Darwin.close(descriptor)
  #endif
}
