import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

/// Issue 36, item 1: a coordinator on a ``SilentFirstAuthorizer`` tries without the user first
/// and bounces only when the silent stage says the user must act; an outage of the silent path
/// never bounces, and makes one request per back-off step.
@Suite(.timeLimit(.minutes(1))) struct SilentFirstAuthorizerTests {
  /// What the silent stage answers next.
  enum Answer: Sendable {
    case model
    case needsUser
    case down
  }

  /// A coordinator on a silent-first authorizer whose stages count their calls (a silent
  /// refresh and a bounce are both scripted: no server, no other app).
  final class Rig: Sendable {
    let clock = ManualClock()
    let answer = LockedState(Answer.model)
    let silentCalls = LockedState(0)
    let bounces = LockedState(0)
    let reasons = LockedState<[AuthorizationReason]>([])
    let coordinator: AuthCoordinator

    init(
      lifetime: TimeInterval = 3600, allowsInteraction: Bool = true,
      policy: SilentRefreshPolicy = .authorizersOwn
    ) {
      let clock = self.clock
      let answer = self.answer
      let silentCalls = self.silentCalls
      let bounces = self.bounces
      let reasons = self.reasons
      let silent = ClosureAuthorizer(isInteractive: false) { request in
        let number = silentCalls.withLock {
          $0 += 1
          return $0
        }
        reasons.withLock { $0.append(request.reason) }
        switch answer.withLock({ $0 }) {
        case .model:
          return makeModel("silent-\(number)", clock: clock, expiresIn: lifetime)
        case .needsUser:
          throw AuthCoordinatorError(.interactionRequired, "the refresh family ended")
        case .down:
          throw AuthCoordinatorError(.networkError, "the refresh endpoint is down")
        }
      }
      let interactive = ClosureAuthorizer { request in
        let number = bounces.withLock {
          $0 += 1
          return $0
        }
        return try await request.exchange {
          makeModel("bounce-\(number)", clock: clock, expiresIn: lifetime)
        }
      }
      var configuration = AuthCoordinator.Configuration(authorizationTimeout: .seconds(120))
      configuration.clock = clock
      configuration.now = clock.dateSource
      configuration.allowsInteraction = allowsInteraction
      configuration.random = { 0.5 }
      configuration.silentRefresh = policy
      coordinator = AuthCoordinator(
        authorizer: SilentFirstAuthorizer(silent: silent, interactive: interactive),
        configuration: configuration)
    }

    func model(_ refresh: RefreshPolicy = .ifNeeded) async throws -> AuthModel {
      try await coordinator.authModel(for: u1, refresh: refresh)
    }
  }

  @Test func aSilentAnswerIsServedWithoutABounce() async throws {
    let rig = Rig()
    let models = try await withThrowingTaskGroup(of: AuthModel.self) { group in
      for _ in 0..<1000 { group.addTask { try await rig.model() } }
      return try await group.reduce(into: [AuthModel]()) { $0.append($1) }
    }
    #expect(Set(models.map(\.accessToken)) == ["silent-1"])
    #expect(rig.silentCalls.withLock { $0 } == 1)
    #expect(rig.bounces.withLock { $0 } == 0)
  }

  @Test func theUserMustActBouncesOnceAndTheNextExpiryIsSilentAgain() async throws {
    let rig = Rig()
    rig.answer.withLock { $0 = .needsUser }
    #expect(try await rig.model().accessToken == "bounce-1")
    #expect(rig.silentCalls.withLock { $0 } == 1)
    #expect(rig.bounces.withLock { $0 } == 1)
    // The server holds a refresh family from now on: the expiry costs no bounce.
    rig.answer.withLock { $0 = .model }
    rig.clock.advance(by: .seconds(3600))
    #expect(try await rig.model().accessToken == "silent-2")
    // The container's NeedRefreshToken is a silent refresh too.
    let forced = try await rig.model(.force(rejecting: "silent-2"))
    #expect(forced.accessToken == "silent-3")
    #expect(rig.bounces.withLock { $0 } == 1)
  }

  @Test func anOutageOfTheSilentPathNeverBouncesAndMakesOneRequestPerBackOffStep() async throws {
    let rig = Rig(
      policy: SilentRefreshPolicy(
        maxAttempts: 1, retryDelay: .seconds(10), maxRetryDelay: .seconds(10)))
    rig.answer.withLock { $0 = .down }
    for _ in 0..<50 {
      do {
        _ = try await rig.model(.force(rejecting: nil))
        Issue.record("a model while the silent path is down")
      } catch let error as AuthCoordinatorError {
        #expect(error.code == .networkError)
      }
    }
    #expect(rig.silentCalls.withLock { $0 } == 1, "the back-off step answers the others")
    #expect(rig.bounces.withLock { $0 } == 0)
    // The next step (jitter pinned: 7.5 s) makes one more request.
    rig.clock.advance(by: .milliseconds(7500))
    rig.answer.withLock { $0 = .model }
    #expect(try await rig.model().accessToken == "silent-2")
    #expect(rig.bounces.withLock { $0 } == 0)
  }

  @Test func aRefreshAheadOnlyEverTakesTheSilentPath() async throws {
    let rig = Rig(policy: SilentRefreshPolicy(refreshAhead: .fixed(.seconds(600))))
    #expect(try await rig.model().accessToken == "silent-1")
    rig.answer.withLock { $0 = .needsUser }
    // Inside the window (jitter 0.5: from 450 s before expiry): served, and a background
    // refresh that may not bounce.
    rig.clock.advance(by: .seconds(3600 - 400))
    #expect(try await rig.model().accessToken == "silent-1")
    try await waitUntil { rig.silentCalls.withLock { $0 } == 2 }
    #expect(rig.reasons.withLock { $0.last } == .refreshAhead)
    #expect(try await rig.model().accessToken == "silent-1")
    #expect(rig.bounces.withLock { $0 } == 0)
  }

  @Test func anExtensionNeverBouncesAndGetsTheSilentStagesAnswer() async throws {
    let rig = Rig(allowsInteraction: false)
    rig.answer.withLock { $0 = .needsUser }
    do {
      _ = try await rig.model()
      Issue.record("a model without the user")
    } catch let error as AuthCoordinatorError {
      #expect(error.code == .interactionRequired)
    }
    #expect(rig.bounces.withLock { $0 } == 0)
  }

  /// Polls `condition` (yielding; no sleeps): a background flight has no caller to await.
  func waitUntil(_ condition: @Sendable () -> Bool) async throws {
    for _ in 0..<100_000 where !condition() { await Task.yield() }
    #expect(condition())
  }
}
