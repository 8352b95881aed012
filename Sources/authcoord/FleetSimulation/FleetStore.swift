import AuthCoordinator
import Foundation

/// One simulated process's view of the shared ``InMemoryTokenStore`` (the real one: fenced
/// saves), with a small virtual latency, the process's pauses, and failed saves.
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

  func model(for key: AccountKey) async throws -> AuthModel? {
    await process.gate(clock)
    await latency()
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
    await process.maybePause(at: "save", clock: clock, ledger: ledger)
    await process.gate(clock)
    await latency()
    let rate = process.faults.failedSaves
    if process.draw({ $0.chance(rate) }) {
      ledger.count("fault: save failed")
      throw SaveFault()
    }
    let saved = await inner.save(model, for: key, fence: fence)
    if saved {
      ledger.stored(refreshToken: model.refreshToken, key: key, process: process.index)
    } else {
      ledger.count("fenced save refused")
    }
    return saved
  }

  func removeModels(forAccount account: String) async throws {
    await process.gate(clock)
    await inner.removeModels(forAccount: account)
  }

  func removeAll() async throws {
    await process.gate(clock)
    await inner.removeAll()
  }
}
