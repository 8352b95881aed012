import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives
import Testing

@testable import AuthCoordinator

/// A thread's replicas of the models it served (`HitReplicas`), alone: one thread, no tasks.
@Suite struct HitReplicasTests {
  let date = Date(timeIntervalSince1970: 1_800_000_000)
  let hash = AccountTable.hash(ofUser: u1.account)
  let epoch = AtomicCounter()
  let counts = ReplicaHitCounts()

  /// Strings longer than 15 bytes, which have buffers (shorter ones are stored inline).
  var model: AuthModel {
    AuthModel(
      uid: "2088" + String(repeating: "1", count: 12),
      accessToken: String(repeating: "t", count: 40),
      mcUid: "user-" + String(repeating: "9", count: 20), expiresAt: date.addingTimeInterval(3600),
      extraInfo: ["scope": String(repeating: "s", count: 20)],
      refreshToken: "r-" + String(repeating: "r", count: 30))
  }

  func note(
    _ replicas: HitReplicas, _ model: AuthModel, key: AccountKey = u1, coordinator: UInt64 = 1,
    window: KeyMachine.HitWindow = .init(leeway: 60, refreshAheadAt: nil)
  ) {
    replicas.noteHit(
      key, hash: AccountTable.hash(ofUser: key.account), coordinator: coordinator, counts: counts,
      model: model, window: window, epoch: epoch, seen: epoch.value)
  }

  func serve(
    _ replicas: HitReplicas, key: AccountKey = u1, coordinator: UInt64 = 1, at: Date? = nil
  ) -> AuthModel? {
    replicas.serve(
      key, hash: AccountTable.hash(ofUser: key.account), coordinator: coordinator,
      at: at ?? date)
  }

  @Test func aKeyHitTwiceAtOneEpochIsServedFromACopyWithBuffersOfItsOwn() {
    let replicas = HitReplicas()
    let model = self.model
    #expect(serve(replicas) == nil)
    note(replicas, model)
    #expect(serve(replicas) == nil, "a key hit once is not copied")
    note(replicas, model)
    let served = serve(replicas)
    #expect(served == model)
    #expect(counts.total == 1)
    guard let served else { return }
    #expect(bufferAddress(served.accessToken) != bufferAddress(model.accessToken))
    #expect(bufferAddress(served.uid) != bufferAddress(model.uid))
    #expect(bufferAddress(served.mcUid) != bufferAddress(model.mcUid))
    #expect(bufferAddress(served.refreshToken!) != bufferAddress(model.refreshToken!))
    #expect(served.extraInfo == model.extraInfo)
  }

  @Test func aMovedEpochSendsTheRequestToTheMachine() {
    let replicas = HitReplicas()
    note(replicas, model)
    note(replicas, model)
    guard let first = serve(replicas) else {
      Issue.record("no replica")
      return
    }
    _ = epoch.next()
    #expect(serve(replicas) == nil, "the stripe changed: the machine decides")
    // The machine served an equal model at the new epoch: the copy is current again, not
    // copied a second time.
    note(replicas, model)
    let again = serve(replicas)
    #expect(again == model)
    #expect(again.map { bufferAddress($0.accessToken) } == bufferAddress(first.accessToken))
    // A different model at the next epoch: a candidate again, copied at its second hit.
    _ = epoch.next()
    var second = model
    second.accessToken = String(repeating: "n", count: 40)
    note(replicas, second)
    #expect(serve(replicas) == nil)
    note(replicas, second)
    #expect(serve(replicas) == second)
    #expect(counts.total == 3)
  }

  @Test func aKeyTheMachineNoLongerServesIsForgotten() {
    let replicas = HitReplicas()
    note(replicas, model)
    note(replicas, model)
    #expect(serve(replicas) != nil)
    _ = epoch.next()
    #expect(serve(replicas) == nil)
    replicas.forget(u1, hash: hash, coordinator: 1)
    // Forgotten: the next hit at the same epoch is only a candidate.
    note(replicas, model)
    #expect(serve(replicas) == nil)
  }

  @Test func theWindowIsTheMachinesRule() {
    let replicas = HitReplicas()
    let window = KeyMachine.HitWindow(leeway: 60, refreshAheadAt: date.addingTimeInterval(1800))
    note(replicas, model, window: window)
    note(replicas, model, window: window)
    #expect(serve(replicas, at: date.addingTimeInterval(1799)) != nil)
    #expect(serve(replicas, at: date.addingTimeInterval(1800)) == nil, "a refresh ahead is due")
    let late = KeyMachine.HitWindow(leeway: 60, refreshAheadAt: nil)
    note(replicas, model, window: late)
    note(replicas, model, window: late)
    #expect(serve(replicas, at: date.addingTimeInterval(3539)) != nil)
    #expect(serve(replicas, at: date.addingTimeInterval(3540)) == nil, "inside the leeway")
    for offset in [0.0, 1799, 1800, 3539, 3540, 3600, -10] {
      let at = date.addingTimeInterval(offset)
      #expect(window.admits(model, at: at) == Self.machineServes(model, window, at: at))
      #expect(late.admits(model, at: at) == Self.machineServes(model, late, at: at))
    }
  }

  @Test func oneHitInAPeriodTakesTheLockForTheKeysRecency() {
    let replicas = HitReplicas()
    note(replicas, model)
    note(replicas, model)
    let period = Int(HitReplicas.recencyPeriod)
    let served = (1...period * 2).map { _ in serve(replicas) != nil }
    #expect(served.filter { !$0 }.count == 2)
    #expect(served[period - 1] == false && served[2 * period - 1] == false)
    #expect(counts.total == UInt64(2 * period - 2))
  }

  @Test func replicasAreOfOneCoordinatorAndOneKey() {
    let replicas = HitReplicas()
    let other = AccountKey(account: u1.account, mode: "auth_user")
    note(replicas, model)
    note(replicas, model)
    var second = model
    second.accessToken = String(repeating: "o", count: 40)
    note(replicas, second, key: other)
    note(replicas, second, key: other)
    #expect(serve(replicas, coordinator: 2) == nil)
    #expect(serve(replicas)?.accessToken == model.accessToken)
    #expect(serve(replicas, key: other)?.accessToken == second.accessToken)
    #expect(serve(replicas, key: u2) == nil)
  }

  @Test func aThreadsCountOfARetiredCoordinatorIsKept() {
    let replicas = HitReplicas()
    let limit = UInt64(HitReplicas.tallyLimit)
    // One coordinator more than the limit: the first one's counter is retired, its replicas
    // dropped, and its hits still counted.
    for coordinator in 1...(limit + 1) {
      note(replicas, model, coordinator: coordinator)
      note(replicas, model, coordinator: coordinator)
      if coordinator == 1 { #expect(serve(replicas, coordinator: 1) != nil) }
    }
    #expect(counts.total == 1)
    #expect(serve(replicas, coordinator: 1) == nil, "its replicas went with its counter")
    #expect(serve(replicas, coordinator: limit + 1) != nil)
    #expect(counts.total == 2)
  }

  /// The machine's own rule, as `servableModel(at:)` states it.
  static func machineServes(_ model: AuthModel, _ window: KeyMachine.HitWindow, at: Date) -> Bool {
    guard model.isValid(at: at, leeway: window.leeway) else { return false }
    if let due = window.refreshAheadAt { return at < due }
    return true
  }
}

/// Where the bytes of a string longer than 15 bytes (one with a buffer) are.
private func bufferAddress(_ string: String) -> UInt? {
  var string = string
  return string.withUTF8 { UInt(bitPattern: $0.baseAddress) }
}
