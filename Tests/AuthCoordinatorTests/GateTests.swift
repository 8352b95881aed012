import AuthCoordinatorTestKit
import SyncPrimitives
import Testing

@Suite(.timeLimit(.minutes(1))) struct GateTests {
  @Test func aClosedGateHoldsCallsUntilOpened() async throws {
    let gate = Gate(closed: true)
    let passed = LockedState(0)
    let calls = (0..<3).map { _ in
      Task {
        await gate.pass()
        passed.withLock { $0 += 1 }
      }
    }
    try await gate.waitUntilHeld(3)
    #expect(passed.withLock { $0 } == 0, "held, not passed")
    gate.open()
    for call in calls { await call.value }
    #expect(passed.withLock { $0 } == 3)
    #expect(gate.held == 3)
    await gate.pass()
    #expect(gate.held == 3, "an open gate holds nothing")
  }

  @Test func closingLetsTheNextCallsThrough() async throws {
    let gate = Gate()
    gate.close(lettingThrough: 2)
    await gate.pass()
    await gate.pass()
    #expect(gate.held == 0)
    let third = Task { await gate.pass() }
    try await gate.waitUntilHeld(1)
    gate.open()
    await third.value
    #expect(gate.held == 1)
  }
}
