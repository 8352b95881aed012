import AuthCoordinator
import Testing

@testable import AlipayBridge

/// The provider's decisions, driven synchronously.
@Suite(.timeLimit(.minutes(2))) struct PendingAuthorizationsTests {
  typealias Machine = PendingAuthorizations<Int, Int>
  let ok: Result<AuthCode, AuthCoordinatorError> = .success(AuthCode("C"))

  @Test func callbackBeforeParkingIsKeptForTheWaiter() {
    var machine = Machine()
    let registered = machine.register("r")
    #expect(registered)
    guard case .kept("r", nil) = machine.deliver(requestID: "r", conflicting: false, outcome: ok)
    else {
      Issue.record("expected kept")
      return
    }
    guard
      case .reject(.duplicate, "r") = machine.deliver(
        requestID: "r", conflicting: false, outcome: ok)
    else {
      Issue.record("expected duplicate")
      return
    }
    guard case .resume(.success(let code)) = machine.park("r", 1) else {
      Issue.record("expected resume")
      return
    }
    #expect(code.value == "C")
    #expect(machine.pendingIDs.isEmpty)
  }

  @Test func callbackAfterParkingResumesTheWaiterAndCancelsTheTimer() {
    var machine = Machine()
    _ = machine.register("r")
    _ = machine.advance("r", to: .opened)
    guard case .parked = machine.park("r", 42) else {
      Issue.record("expected parked")
      return
    }
    let armed = machine.becameActive()
    _ = machine.attach("r", token: armed[0].token, timer: 9)
    guard
      case .resume(42, _, "r", 9) = machine.deliver(
        requestID: "r", conflicting: false, outcome: ok)
    else {
      Issue.record("expected resume")
      return
    }
    guard case .none = machine.graceExpired("r", token: armed[0].token) else {
      Issue.record("a finished request cannot be abandoned")
      return
    }
  }

  @Test func cancelBeforeParkingEndsEarly() {
    var machine = Machine()
    _ = machine.register("r")
    let action = machine.cancel("r")
    #expect(action.waiter == nil)
    let advanced = machine.advance("r", to: .opening)
    #expect(!advanced)
    guard
      case .reject(.late, "r") = machine.deliver(requestID: "r", conflicting: false, outcome: ok)
    else {
      Issue.record("expected late")
      return
    }
    guard case .resume(.failure(let error)) = machine.park("r", 1), error is CancellationError
    else {
      Issue.record("expected cancellation")
      return
    }
  }

  @Test func endingsAreRememberedBoundedly() {
    var machine = Machine(rememberedEndings: 4)
    for index in 0..<6 {
      _ = machine.register("r\(index)")
      _ = machine.remove("r\(index)")
    }
    guard
      case .reject(.unknownRequestID, "r0") = machine.deliver(
        requestID: "r0", conflicting: false, outcome: ok)
    else {
      Issue.record("r0 should be forgotten")
      return
    }
    guard
      case .reject(.late, "r5") = machine.deliver(
        requestID: "r5", conflicting: false, outcome: ok)
    else {
      Issue.record("r5 should be remembered")
      return
    }
  }

  @Test func preparingRequestsAreNotArmed() {
    var machine = Machine()
    _ = machine.register("r")
    let whilePreparing = machine.becameActive()
    #expect(whilePreparing.isEmpty)
    _ = machine.advance("r", to: .opening)
    let onceOpening = machine.becameActive()
    #expect(onceOpening.count == 1)
    let alreadyArmed = machine.becameActive()
    #expect(alreadyArmed.isEmpty)
    _ = machine.resignedActive()
    let afterResign = machine.becameActive()
    #expect(afterResign.count == 1)
  }
}
