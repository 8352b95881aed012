import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The file-backed pair in one test process: two coordinators, each with its own
/// `FileTokenStore` and `FileAuthorizationLease` objects on the same files, as two processes
/// would open them (real files, real clock, inotify). The real multi-process tests are in
/// `MultiProcessTests`.
@Suite(.timeLimit(.minutes(1))) struct SharedFileLeaseTests {
  @Test func twoProcessesViewsOfOneFileStoreAuthorizeOnce() async throws {
    let directory = FileManager.default.temporaryDirectory
      .appendingPathComponent("shared-lease-\(UUID().uuidString)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let url = directory.appendingPathComponent("tokens.store")
    let issuer = TestTokenIssuer()
    let expired = issuer.login(mcUid: "u1", at: Date().addingTimeInterval(-7200))
    try await FileTokenStore(url: url).save(expired, for: u1)

    let authorizer = ScriptedAuthorizer()
    let processes = (0..<2).map { _ in
      let store = FileTokenStore(url: url)
      return AuthCoordinator(
        store: store, lease: FileAuthorizationLease(nextTo: store), authorizer: authorizer)
    }
    let callers = CallerTracker()
    let tasks = processes.flatMap { process in
      (0..<50).map { _ in callers.task { try await process.authModel(for: u1) } }
    }
    let call = await authorizer.nextCall()
    #expect(call.request.replacing?.refreshToken == expired.refreshToken)
    // Both processes' callers are parked before the holder answers.
    try await callers.waitUntil {
      processes.map(\.statistics.waitingCallers).reduce(0, +) == 100
    }
    let rotated = try issuer.refresh(expired.refreshToken, mcUid: "u1", at: Date())
    call.succeed(with: rotated)
    for task in tasks { #expect(try await task.value == rotated) }
    #expect(authorizer.callCount == 1)
    #expect(try await FileTokenStore(url: url).model(for: u1) == rotated)
  }
}
