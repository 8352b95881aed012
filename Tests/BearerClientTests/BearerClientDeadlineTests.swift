import AuthCoordinatorOAuth2
import AuthCoordinatorTestKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

/// Every call ends by the client's deadline, whatever the server does.
@Suite(.timeLimit(.minutes(5))) struct BearerClientDeadlineTests {
  /// A server that reads the request and never answers: the call fails `timed_out` when the
  /// (manual) clock reaches the deadline, and the request is cancelled (its connection closed).
  @Test func aServerThatNeverAnswersEndsTheCallAtTheDeadline() async throws {
    let harness = try BearerHarness()
    _ = try await harness.currentToken()
    let listener = try SilentListener()
    defer { listener.close() }
    let url = URL(string: "http://127.0.0.1:\(listener.port)/resource")!
    let clock = ManualClock()
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: url, session: harness.session,
      deadline: .seconds(3), clock: clock)

    let call = Task { try await client.data(from: url) }
    let (connection, _) = try await listener.acceptRequest()
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(3))

    let error = await #expect(throws: AuthCoordinatorError.self) { try await call.value }
    #expect(error?.code == .timedOut)
    #expect(error?.isTransient == true)
    #expect(error?.message.contains("deadline of 3.0 seconds") == true)
    #expect(await listener.waitForClose(connection, timeoutMilliseconds: 30_000))
  }

  /// Before the deadline nothing ends the call early: an answer that comes first is returned,
  /// and the deadline's timer is gone with the call.
  @Test func anAnswerBeforeTheDeadlineIsReturnedAndItsTimerEnds() async throws {
    let harness = try BearerHarness()
    let clock = ManualClock()
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: harness.server.baseURL,
      session: harness.session, deadline: .seconds(3), clock: clock)

    let (_, response) = try await client.data(from: harness.resource)

    #expect(response.statusCode == 200)
    #expect(clock.sleeperCount == 0)
  }

  /// The default deadline, on the real clock: a minute. Real time is the property here: a
  /// 300 ms deadline ends a call to a silent server, with a wide margin for a loaded machine.
  @Test func theDeadlineIsRealTimeByDefault() async throws {
    let harness = try BearerHarness()
    #expect(harness.client.deadline == .seconds(60))
    _ = try await harness.currentToken()
    let listener = try SilentListener()
    defer { listener.close() }
    let url = URL(string: "http://127.0.0.1:\(listener.port)/resource")!
    let client = BearerClient(
      coordinator: harness.coordinator, key: harness.key, origin: url, session: harness.session,
      deadline: .milliseconds(300))
    let started = ContinuousClock.now

    let error = await #expect(throws: AuthCoordinatorError.self) {
      try await client.data(from: url)
    }

    #expect(error?.code == .timedOut)
    #expect(ContinuousClock.now - started < .seconds(30))
  }
}
