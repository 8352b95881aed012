import AuthCoordinatorOAuth2
import Foundation
import RotatingTokenServer
import Testing

/// A cancelled Task cancels the HTTP request: the simulated server sees the client hang up
/// during its delay and grants nothing.
@Suite(.timeLimit(.minutes(1))) struct CancellationTests {
  @Test func cancellingTheTaskCancelsTheTokenRequest() async throws {
    let server = try RotatingTokenServer()
    defer { server.stop() }
    try await server.configure(delay: 10)
    let oauth = authorizer(server, timeout: .seconds(30))
    let task = Task { try await oauth.authorize(request()) }
    // Waits (by asking the server, no sleep) until the server holds the request.
    var held = false
    for _ in 0..<5_000 where !held {
      held = try await server.stats().inFlight == 1
    }
    #expect(held)
    task.cancel()
    await #expect(throws: CancellationError.self) { try await task.value }
    var stats = try await server.stats()
    for _ in 0..<5_000 where stats.aborted == 0 {
      stats = try await server.stats()
    }
    #expect(stats.aborted == 1)
    #expect(stats.issued == 0)
  }
}
