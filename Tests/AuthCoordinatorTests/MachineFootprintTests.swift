import Testing

@testable import AuthCoordinator

/// Every key the coordinator knows keeps its state machine in memory (up to `maxIdleKeys`
/// idle ones, 10,000 by default, and every key with a flight): its size is memory per cached
/// account. The policy is shared by the coordinator's machines, and the records only a flight
/// under the lease or an unsaved model needs are kept out of line (issue 38). It was 1,488
/// bytes before; 457 after.
@Suite struct MachineFootprintTests {
  @Test func aKeysStateMachineStaysUnderHalfAKilobyte() {
    #expect(MemoryLayout<KeyMachine>.size <= 512)
    #expect(MemoryLayout<KeyMachine.State>.size <= 128, "a phase's record boxed")
    #expect(MemoryLayout<KeyMachine.Cache>.size <= 128, "an unsaved model's grant boxed")
  }

  @Test func machinesOfOneCoordinatorShareTheirPolicy() throws {
    let policy = AccountStateMachine<TestFlight>.Policy(
      refreshLeeway: 60, maxForcedAuthorizations: 3, loopWindow: .seconds(60),
      whenAbandoned: .cancel)
    let settings = AccountStateMachine<TestFlight>.Settings(policy: policy, random: { 0.5 })
    let first = AccountStateMachine<TestFlight>(key: .init(account: "u1"), settings: settings)
    let second = AccountStateMachine<TestFlight>(key: .init(account: "u2"), settings: settings)
    #expect(first.settings === second.settings)
    #expect(first.policy == policy)
  }
}
