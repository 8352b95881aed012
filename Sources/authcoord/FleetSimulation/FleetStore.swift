import AuthCoordinator
import Foundation

/// One simulated process's view of the shared ``InMemoryTokenStore`` (the real one: fenced
/// saves), with a small virtual latency, the process's pauses, failed saves and reads, and
/// slow and hung operations.
struct FleetStore: FencedTokenStore {
  struct SaveFault: Error, CustomStringConvertible {
    var description: String { "simulated save failure (a full disk)" }
  }

  let inner: InMemoryTokenStore
  let process: FleetProcessState
  let clock: VirtualClock
  let ledger: FleetLedger

  private func latency() async {
    let delay = process.draw { Duration.microseconds(Int.random(in: 0...3_000, using: &$0)) }
    try? await clock.sleep(for: delay)
  }

  struct ReadFault: Error, CustomStringConvertible {
    var description: String { "simulated read failure (the store could not be read)" }
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    ledger.began(.storeRead, key.account, process: process.index)
    defer { ledger.ended(.storeRead, key.account, process: process.index) }
    await process.gate(clock)
    await process.maybeHang("store read", clock: clock, ledger: ledger)
    await process.maybeSlow("store read", clock: clock, ledger: ledger)
    await latency()
    if process.fails("store read", rate: \.failedReads, ledger: ledger) { throw ReadFault() }
    return await inner.model(for: key)
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await process.gate(clock)
    await latency()
    let rate = process.faults.failedSaves
    if process.draw({ $0.chance(rate) }) {
      ledger.count("fault: save failed")
      throw SaveFault()
    }
    await inner.save(model, for: key)
    ledger.stored(refreshToken: model.refreshToken, key: key, process: process.index)
  }

  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    ledger.began(.save, key.account, process: process.index)
    defer { ledger.ended(.save, key.account, process: process.index) }
    await process.maybePause(at: "save", clock: clock, ledger: ledger)
    await process.gate(clock)
    await process.maybeHang("save", clock: clock, ledger: ledger)
    await process.maybeSlow("save", clock: clock, ledger: ledger)
    await latency()
    let rate = process.faults.failedSaves
    let token = model.refreshToken.map(FleetTransport.short) ?? "no refresh token"
    if process.draw({ $0.chance(rate) }) {
      ledger.count("fault: save failed")
      ledger.note("p\(process.index)'s save of \(token) for \(key.account) failed (fence \(fence))")
      ledger.saveInDoubt(key, process: process.index)
      throw SaveFault()
    }
    let saved = await inner.save(model, for: key, fence: fence)
    ledger.note(
      "p\(process.index)'s save of \(token) for \(key.account) \(saved ? "landed" : "refused") "
        + "(fence \(fence))")
    if saved {
      ledger.stored(refreshToken: model.refreshToken, key: key, process: process.index)
      ledger.saveLanded(key, access: model.accessToken, process: process.index)
    } else {
      ledger.count("fenced save refused")
      if inner.refusesRevokedFence(fence, for: key.account) {
        ledger.count("fenced save refused: its grant revoked by a logout")
      }
    }
    return saved
  }

  func removeModels(forAccount account: String) async throws {
    try await removeModels(forAccount: account, refusingFencesThrough: nil)
  }

  func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64)
    async throws
  {
    try await removeModels(forAccount: account, refusingFencesThrough: Optional(fence))
  }

  /// A logout's removal, with the revoked fence when the lease told the revoked fences.
  private func removeModels(forAccount account: String, refusingFencesThrough fence: UInt64?)
    async throws
  {
    let account = AccountKey.normalized(account)
    ledger.began(.removal, account, process: process.index)
    defer { ledger.ended(.removal, account, process: process.index) }
    await process.gate(clock)
    if let fence {
      await inner.removeModels(forAccount: account, refusingFencesThrough: fence)
      ledger.note("p\(process.index) removed \(account)'s models, refusing fences through \(fence)")
    } else {
      await inner.removeModels(forAccount: account)
      ledger.note("p\(process.index) removed \(account)'s models")
    }
    // Between a logout's removal and its announcement: a holder that has not heard of the
    // sign-out yet checks its grant (`isCurrent`) and nothing else keeps its late result out.
    if let length = process.takePauseAfterRemoval() {
      ledger.note("p\(process.index) paused after the removal for \(length)")
      process.pause(from: clock.world.now, for: length)
      await process.gate(clock)
    } else {
      await process.maybePause(at: "removal", clock: clock, ledger: ledger)
    }
  }

  func removeAll() async throws {
    await process.gate(clock)
    await inner.removeAll()
  }

  func removeAll(refusingFencesThrough fence: UInt64) async throws {
    await process.gate(clock)
    await inner.removeAll(refusingFencesThrough: fence)
  }
}
