import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// The request id an authorizer may send as `target_id` or `state`: made on first read, so a
/// silent authorizer that never reads it costs the flight no random UUID.
@Suite(.timeLimit(.minutes(1))) struct AuthorizationRequestTests {
  @Test func theCoordinatorsRequestIDIsARandomUUIDTheSameOnEveryReadAndNewPerAuthorization()
    async throws
  {
    let harness = Harness()
    let first = Task { try await harness.coordinator.authModel(for: u1) }
    let call = await harness.authorizer.nextCall()
    let id = call.request.requestID
    #expect(UUID(uuidString: id) != nil, "\(id)")
    // Read concurrently: one id, whoever reads first.
    let reads = await withTaskGroup(of: String.self) { group in
      for _ in 0..<16 { group.addTask { call.request.requestID } }
      return await group.reduce(into: Set<String>()) { $0.insert($1) }
    }
    #expect(reads == [id])
    call.succeed(with: makeModel("t1", clock: harness.clock, expiresIn: 10))
    _ = try await first.value

    harness.clock.advance(by: .seconds(60))
    let second = Task { try await harness.coordinator.authModel(for: u1) }
    let next = await harness.authorizer.nextCall()
    #expect(next.request.requestID != id)
    next.succeed(with: makeModel("t2", clock: harness.clock, expiresIn: 3600))
    _ = try await second.value
  }

  @Test func aRequestMadeWithAnIDKeepsIt() {
    let request = AuthorizationRequest(key: u1, reason: .missing, requestID: "fixed-id")
    #expect(request.requestID == "fixed-id")
    #expect(request.requestID == "fixed-id")
  }
}
