import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

/// Part of issue 13 (errors a service can classify and print). An authorizer's transport
/// failure is `network_error`, not `authorization_failed`; a printed error never shows the
/// user info, query or fragment of a URL its cause carries. Both tests failed before.
@Suite(.timeLimit(.minutes(2))) struct ErrorClassificationTests {
  @Test func aTransportFailureInTheAuthorizerIsANetworkError() async {
    let coordinator = AuthCoordinator(
      authorizer: ClosureAuthorizer { _ in throw URLError(.cannotConnectToHost) })
    do {
      _ = try await coordinator.authModel(for: u1)
      Issue.record("expected network_error")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .networkError, "\(error)")
      #expect(error.underlying is URLError)
    } catch {
      Issue.record("expected network_error, got \(error)")
    }
  }

  @Test func anAuthorizersOwnErrorIsStillAnAuthorizationFailure() async {
    struct Refused: Error {}
    let coordinator = AuthCoordinator(authorizer: ClosureAuthorizer { _ in throw Refused() })
    await #expect(throws: AuthCoordinatorError(.authorizationFailed)) {
      try await coordinator.authModel(for: u1)
    }
  }

  @Test func aPrintedErrorRedactsTheCredentialsAndQueryOfItsCausesURLs() {
    let url = "https://client:s3cret-pw@auth.example.com:8443/oauth/token?code=SECRET-CODE#frag-x"
    let cause = NSError(
      domain: NSURLErrorDomain, code: NSURLErrorCannotConnectToHost,
      userInfo: [
        NSURLErrorFailingURLErrorKey: URL(string: url)!,
        NSLocalizedDescriptionKey: "Could not connect to \(url)",
      ])
    let printed = "\(AuthCoordinatorError(.networkError, "failed", underlying: cause))"
    for secret in ["s3cret-pw", "client:", "SECRET-CODE", "frag-x"] {
      #expect(!printed.contains(secret), "\(printed)")
    }
    // The library's one URL format (URLRedaction), as in every description.
    #expect(
      printed.contains(
        "https://<redacted>@auth.example.com:8443/oauth/token?code=<redacted>#<redacted>"),
      "\(printed)")
  }

  @Test func urlsWithoutSecretsArePrintedAsTheyAre() {
    let cause = NSError(
      domain: "test", code: 1,
      userInfo: [NSLocalizedDescriptionKey: "see https://status.example.com/incidents"])
    let printed = "\(AuthCoordinatorError(.networkError, underlying: cause))"
    #expect(printed.contains("https://status.example.com/incidents"))
    #expect(!printed.contains("<redacted>"))
  }

  @Test func anAuthorizerMarksItsOwnErrorsTransientOrTerminal() async {
    struct BackendDown: ClassifiedError { var isTransient: Bool { true } }
    struct Declined: ClassifiedError { var isTransient: Bool { false } }
    let cases: [(any Error & Sendable, Bool)] = [
      (BackendDown(), true),
      (Declined(), false),
      (AuthCoordinatorError.transient(nil, "down"), true),
      (AuthCoordinatorError.terminal(nil, "refused"), false),
      (URLError(.timedOut), true),
      (AuthCoordinatorError(.authorizationFailed, "plain"), false),
    ]
    for (thrown, transient) in cases {
      let coordinator = AuthCoordinator(authorizer: ClosureAuthorizer { _ in throw thrown })
      do {
        _ = try await coordinator.authModel(for: u1)
        Issue.record("expected a failure for \(thrown)")
      } catch let error as AuthCoordinatorError {
        #expect(error.isTransient == transient, "\(thrown) -> \(error)")
      } catch {
        Issue.record("expected AuthCoordinatorError, got \(error)")
      }
    }
  }

  @Test func codesHaveADefaultTransience() {
    for code in [AuthCoordinatorError.Code.timedOut, .networkError, .storeFailed] {
      #expect(AuthCoordinatorError(code).isTransient, "\(code)")
    }
    for code in [
      AuthCoordinatorError.Code.authorizationFailed, .signedOut, .refreshLoop,
      .interactionRequired, .abandoned, AuthCoordinatorError.Code(rawValue: "custom"),
    ] {
      #expect(!AuthCoordinatorError(code).isTransient, "\(code)")
    }
    #expect(AuthCoordinatorError(.authorizationFailed, transient: true).isTransient)
    #expect(!AuthCoordinatorError(.networkError, transient: false).isTransient)
  }
}

/// Every code type has the one shape of ``StableCode``: open, compared and printed by its name.
@Suite struct StableCodeTests {
  @Test func codesPrintAsTheirNamesAndCompareByThem() {
    let store = TokenStoreError.Code(rawValue: "made_up")
    let core = AuthCoordinatorError.Code(rawValue: "made_up")
    #expect("\(store)" == "made_up" && "\(core)" == "made_up")
    #expect(AuthCoordinatorError.Code(rawValue: "timed_out") == .timedOut)
    #expect("\(TokenStoreError.Code.corruptFile)" == "corrupt_file")
  }
}
