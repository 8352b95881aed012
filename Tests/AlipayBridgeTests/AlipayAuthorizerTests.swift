import AlipayBridge
import AuthCoordinator
import Foundation
import SyncPrimitives
import Testing

@Suite(.timeLimit(.minutes(2))) struct AlipayAuthorizerTests {
  /// Rule 20 (Sources/AuthCoordinator/Documentation.docc/Semantics.md): an extension's coordinator asks with `allowsInteraction`
  /// off; account connect always bounces to Alipay, so the authorizer refuses at once with
  /// `interaction_required`, before it asks its provider for a code.
  @Test func anExtensionNeverBouncesToAlipay() async {
    let provider = CountingProvider()
    let authorizer = AlipayAuthorizer(provider: provider, exchanger: UnusedExchanger())
    let request = AuthorizationRequest(
      key: AccountKey(mcUid: "u1"), reason: .missing, requestID: "r1", allowsInteraction: false)
    await #expect(throws: AuthCoordinatorError(.interactionRequired)) {
      try await authorizer.authorize(request)
    }
    #expect(provider.calls.withLock { $0 } == 0)

    // The app's coordinator (interaction allowed) does ask the provider.
    let app = AuthorizationRequest(key: AccountKey(mcUid: "u1"), reason: .missing, requestID: "r2")
    await #expect(throws: AuthCoordinatorError(.userCancelled)) {
      try await authorizer.authorize(app)
    }
    #expect(provider.calls.withLock { $0 } == 1)
  }
}

/// Counts calls and answers like a user who cancelled in Alipay.
private struct CountingProvider: AuthCodeProvider {
  let calls = LockedState(0)
  func authCode(for request: AuthorizationRequest) async throws -> AuthCode {
    calls.withLock { $0 += 1 }
    throw AuthCoordinatorError(.userCancelled)
  }
}

private struct UnusedExchanger: TokenExchanger {
  func exchange(_ code: AuthCode, for request: AuthorizationRequest) async throws -> AuthModel {
    Issue.record("no exchange without a code")
    throw AuthCoordinatorError(.exchangeFailed)
  }
}
