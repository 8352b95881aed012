import Testing

@testable import AuthCoordinator

/// What a user's removal waits for (fleet simulation, seed 0x855): the store work of the writes
/// issued before it, not the lease call after a write (the save's grant check), nor reads. A
/// lease or a read that hangs must not hold a logout back; a later operation of the key still
/// waits for everything before it.
@Suite struct StoreSequencerTests {
  let key = AccountKey(account: "u1")

  @Test func aRemovalWaitsForAWritesStoreWorkOnly() {
    var sequencer = StoreSequencer()
    let save = sequencer.reserve(key, writes: true)
    let removal = sequencer.reserveUser("u1")
    #expect(removal.after.count == 1)
    #expect(removal.after.first === save.storeWork)
    // The write landed; its grant check hangs: the removal may go.
    save.storeWorkFinished()
    let mayGo = removal.after.allSatisfy { $0.isOpen }
    #expect(mayGo)
    #expect(!save.done.isOpen)
  }

  /// Without a lease no call follows the write: the save's end is its store work, and its one
  /// latch serves both (one allocation fewer per save of a coordinator without a lease).
  @Test func withoutLeaseCallsAWriteKeepsOneLatchThatARemovalWaitsFor() {
    var sequencer = StoreSequencer()
    let save = sequencer.reserve(key, writes: true, leaseCallsFollow: false)
    #expect(save.storeWork == nil)
    let removal = sequencer.reserveUser("u1")
    #expect(removal.after.count == 1)
    #expect(removal.after.first === save.done)
    #expect(!(removal.after.allSatisfy { $0.isOpen }))
    save.finish()
    #expect(removal.after.allSatisfy { $0.isOpen })
  }

  @Test func aRemovalDoesNotWaitForReads() {
    var sequencer = StoreSequencer()
    let read = sequencer.reserve(key)
    let confirm = sequencer.reserve(AccountKey(account: "u1", mode: .init(rawValue: "other")))
    let removal = sequencer.reserveUser("u1")
    #expect(removal.after.isEmpty)
    #expect(!read.done.isOpen && !confirm.done.isOpen)
  }

  @Test func laterOperationsOfTheKeyWaitForEverythingBefore() {
    var sequencer = StoreSequencer()
    let save = sequencer.reserve(key, writes: true)
    let load = sequencer.reserve(key)
    // A read after a save waits for the save's end, grant check included (rule 21: until the
    // outcome reaches the machine, memory may prefer its model to the store's).
    #expect(load.after.count == 1 && load.after.first === save.done)
    let removal = sequencer.reserveUser("u1")
    let next = sequencer.reserve(key)
    #expect(next.after.count == 1 && next.after.first === removal.done)
    // Another user's removal waits for nothing of u1's.
    #expect(sequencer.reserveUser("u2").after.isEmpty)
  }

  @Test func aRemoveAllWaitsForEveryPendingWrite() {
    var sequencer = StoreSequencer()
    let first = sequencer.reserve(key, writes: true)
    let second = sequencer.reserve(AccountKey(account: "u2"), writes: true)
    _ = sequencer.reserve(AccountKey(account: "u3"))
    let barrier = sequencer.reserveBarrier()
    #expect(barrier.after.count == 2)
    for write in [first.storeWorkGate, second.storeWorkGate] {
      #expect(barrier.after.contains { $0 === write })
    }
  }
}

/// Latches are values that share their state: `===` asks whether two are one latch.
private func === (lhs: Latch?, rhs: Latch?) -> Bool {
  switch (lhs, rhs) {
  case (nil, nil): return true
  case (let lhs?, let rhs?): return lhs.isSame(as: rhs)
  default: return false
  }
}
