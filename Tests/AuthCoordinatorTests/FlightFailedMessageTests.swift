import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// A `flightFailed` event carries the failure's message, redacted as the error's own
/// description is: no user info, query or fragment of the URLs in the underlying error.
@Suite(.timeLimit(.minutes(1))) struct FlightFailedMessageTests {
  @Test func aFailedFlightsEventCarriesItsRedactedMessage() async throws {
    let secret = "RT-9f8e7d6c"
    let failing = try #require(
      URL(string: "https://user:pw@auth.example.com/token?refresh_token=\(secret)#\(secret)"))
    let underlying = URLError(
      .timedOut,
      userInfo: [
        "NSErrorFailingURLKey": failing,
        "NSErrorFailingURLStringKey": failing.absoluteString,
      ])
    let coordinator = AuthCoordinator(
      authorizer: ClosureAuthorizer(isInteractive: false) { _ in
        throw AuthCoordinatorError(
          .networkError, "the token endpoint did not answer", underlying: underlying)
      })
    let recorder = EventRecorder(coordinator)

    do {
      let model = try await coordinator.authModel(for: AccountKey(account: "u1"))
      Issue.record("expected the flight to fail, got \(model)")
    } catch {
      #expect((error as? AuthCoordinatorError)?.code == .networkError)
    }
    let event = try await recorder.first {
      if case .flightFailed = $0 { return true }
      return false
    }

    guard case .flightFailed(let key, _, let code, let message) = event else {
      Issue.record("not a flightFailed event")
      return
    }
    #expect(key == AccountKey(account: "u1"))
    #expect(code == .networkError)
    #expect(message.contains("network_error"))
    #expect(message.contains("the token endpoint did not answer"))
    #expect(message.contains("auth.example.com/token"))
    let leaked = message.contains(secret) || message.contains("pw@")
    #expect(!leaked, "the event's message shows the URL's query, fragment or user info")
  }
}
