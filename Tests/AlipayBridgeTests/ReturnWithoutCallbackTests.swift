import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import Testing

@testable import AlipayBridge

/// The vendor SDK's defect: the user comes back from Alipay and no callback ever follows.
@Suite(.timeLimit(.minutes(2))) struct ReturnWithoutCallbackTests {
  /// A pending request whose URL was opened, with its task and an event subscription.
  struct Pending {
    let clock = ManualClock()
    let provider: AlipayAuthCodeProvider
    let router: AlipayCallbackRouter
    let task: Task<AuthCode, any Error>
    var events: AsyncStream<BridgeEvent>.Iterator

    init(grace: Duration = .seconds(3)) async {
      provider = makeProvider(clock: clock, grace: grace) { _ in true }
      router = AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme])
      events = provider.events.makeAsyncIterator()
      let provider = provider
      task = Task { try await provider.authCode(for: makeRequest("r")) }
      _ = await readEvents(&events) { $0 == .opened(requestID: "r") }
    }
  }

  @Test func aGracePeriodTooLongForTheClockIsClampedInsteadOfTrapping() async throws {
    // A real ContinuousClock: it traps when asked to sleep `.seconds(Int64.max)`.
    let provider = AlipayAuthCodeProvider(
      returnGracePeriod: .seconds(Int64.max),
      authURL: { request in
        URL(string: "https://integrator.example/alipay/auth?state=\(request.requestID)")!
      },
      open: { _ in true })
    #expect(provider.returnGracePeriod < .seconds(Int64.max), "clamped to what a clock can sleep")
    let router = AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme])
    var events = provider.events.makeAsyncIterator()
    let task = Task { try await provider.authCode(for: makeRequest("r")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "r") }
    provider.appDidBecomeActive()  // arms the grace timer
    #expect(router.handle(Callback.success("r")) == .authResult(.matched(requestID: "r")))
    _ = try await task.value
  }

  @Test func noCallbackWithinGraceAbandonsTheRequest() async throws {
    var pending = await Pending()
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.clock.advance(by: .milliseconds(2999))
    #expect(pending.provider.pendingRequestIDs == ["r"])
    pending.clock.advance(by: .milliseconds(1))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await pending.task.value }
    #expect(await pending.events.next() == .abandonedAfterReturn(requestID: "r"))
    #expect(pending.provider.pendingRequestIDs.isEmpty)
    // The callback that shows up afterwards is late.
    #expect(
      pending.router.handle(Callback.success("r"))
        == .authResult(.rejected(reason: .late, requestID: "r")))
  }

  @Test func callbackWithinGraceWins() async throws {
    let pending = await Pending()
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.clock.advance(by: .seconds(2))
    #expect(
      pending.router.handle(Callback.success("r", code: "IN-TIME"))
        == .authResult(.matched(requestID: "r")))
    #expect(try await pending.task.value.value == "IN-TIME")
    pending.clock.advance(by: .seconds(10))
    #expect(pending.clock.sleeperCount == 0)
  }

  @Test func forgedCallbackDuringGraceDoesNotStopTheTimer() async throws {
    let pending = await Pending()
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.router.handle(Callback.success(nil))
    pending.clock.advance(by: .seconds(3))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await pending.task.value }
  }

  @Test func becomingActiveWithNothingPendingDoesNothing() async throws {
    let clock = ManualClock()
    let provider = makeProvider(clock: clock) { _ in true }
    provider.appDidBecomeActive()
    #expect(clock.sleeperCount == 0)
    #expect(provider.pendingRequestIDs.isEmpty)
  }

  @Test func becomingActiveBeforeTheURLIsOpenedArmsNothing() async throws {
    // The builder is still signing the URL: the user has not left, nothing to abandon.
    let clock = ManualClock()
    let gate = AsyncStream<Void>.makeStream()
    let entered = AsyncStream<Void>.makeStream()
    let provider = AlipayAuthCodeProvider(
      clock: clock,
      authURL: { _ in
        entered.continuation.yield()
        for await _ in gate.stream { break }
        return URL(string: "https://integrator.example/auth?state=p")!
      },
      open: { _ in true })
    let task = Task { try await provider.authCode(for: makeRequest("p")) }
    for await _ in entered.stream { break }
    provider.appDidBecomeActive()
    #expect(clock.sleeperCount == 0)
    task.cancel()
    gate.continuation.yield()
    await #expect(throws: CancellationError.self) { try await task.value }
  }

  @Test func resigningActiveDisarmsTheTimer() async throws {
    let pending = await Pending()
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.provider.appWillResignActive()
    pending.clock.advance(by: .seconds(60))
    #expect(pending.provider.pendingRequestIDs == ["r"])
    // Becoming active again re-arms it.
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.clock.advance(by: .seconds(3))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await pending.task.value }
  }

  @Test func repeatedActivationDoesNotRestartTheTimer() async throws {
    let pending = await Pending()
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.clock.advance(by: .seconds(2))
    pending.provider.appDidBecomeActive()
    #expect(pending.clock.sleeperCount == 1)
    pending.clock.advance(by: .seconds(1))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await pending.task.value }
  }

  @Test func gracePeriodIsConfigurable() async throws {
    let pending = await Pending(grace: .seconds(10))
    #expect(pending.provider.returnGracePeriod == .seconds(10))
    #expect(AlipayAuthCodeProvider.defaultReturnGracePeriod == .seconds(3))
    pending.provider.appDidBecomeActive()
    await pending.clock.waitForSleepers(1)
    pending.clock.advance(by: .seconds(9))
    #expect(pending.router.handle(Callback.success("r")) == .authResult(.matched(requestID: "r")))
    _ = try await pending.task.value
  }

  @Test func endToEndUserComesBackWithoutActing() async throws {
    let clock = ManualClock()
    let alipay = FakeAlipayApp(script: .noCallback)
    let provider = makeProvider(clock: clock) { await alipay.open($0) }
    alipay.connect(AlipayCallbackRouter(provider: provider, appSchemes: [Callback.scheme]))
    var events = provider.events.makeAsyncIterator()
    let task = Task { try await provider.authCode(for: makeRequest("e2e")) }
    _ = await readEvents(&events) { $0 == .opened(requestID: "e2e") }
    #expect(alipay.returnToApp().isEmpty)
    provider.appDidBecomeActive()
    await clock.waitForSleepers(1)
    clock.advance(by: .seconds(3))
    await #expect(throws: AuthCoordinatorError(.abandoned)) { try await task.value }
  }

  @Test func abandonedBeforeParkingIsStillAbandoned() {
    // The state machine: the grace timer fires before the waiter parks.
    var machine = PendingAuthorizations<Int, Int>()
    let registered = machine.register("r")
    #expect(registered)
    let advanced = machine.advance("r", to: .opening)
    #expect(advanced)
    let armed = machine.becameActive()
    #expect(armed.map(\.id) == ["r"])
    let attached = machine.attach("r", token: armed[0].token, timer: 7)
    #expect(attached)
    guard case .abandonedBeforeParking("r") = machine.graceExpired("r", token: armed[0].token)
    else {
      Issue.record("expected abandonment")
      return
    }
    guard case .resume(.failure(let error)) = machine.park("r", 1) else {
      Issue.record("expected an immediate resume")
      return
    }
    #expect((error as? AuthCoordinatorError)?.code == .abandoned)
  }
}
