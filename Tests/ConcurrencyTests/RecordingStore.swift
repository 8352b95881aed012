import AuthCoordinator
import SyncPrimitives

/// An in-memory ``TokenStore`` that numbers every operation in the order it ran.
///
/// The stress test uses the numbers to check logout against the store's own order: once the
/// removal a logout issued has run, a caller that starts afterwards may only be given a model
/// that was saved after that removal (rule 9), and every model a caller gets was saved before
/// the caller was resumed (rule 10), unless its save failed: then it must be stored by a retry,
/// superseded by a newer model of the user that was stored, or removed by a logout (rule 21).
///
/// `failingSaves` percent of saves throw before they write (a fault; drawn from `seed`).
final class RecordingStore: TokenStore, @unchecked Sendable {
  struct SaveFault: Error {}

  private struct State {
    var rng: SplitMix64
    var failedSaves = 0
    /// Per user, the highest model number stored.
    var newestSaved: [String: UInt64] = [:]
    var models: [AccountKey: AuthModel] = [:]
    var index = 0
    var lastRemoval: [String: Int] = [:]
    var lastRemoveAll = 0
    /// Model sequence number to the index of its save.
    var saves: [UInt64: Int] = [:]
    var reads = 0
    var removals = 0
    var removeAlls = 0
  }

  private let state: LockedState<State>
  let failingSaves: Double

  init(failingSaves: Double = 0, seed: UInt64 = 0) {
    self.failingSaves = failingSaves
    state = LockedState(State(rng: SplitMix64(seed: seed)))
  }

  /// The store's operation count so far.
  var index: Int { state.withLock { $0.index } }

  var failedSaves: Int { state.withLock { $0.failedSaves } }

  /// Whether a model of `mcUid` numbered above `seq` was stored.
  func storedNewer(than seq: UInt64, for mcUid: String) -> Bool {
    state.withLock { ($0.newestSaved[mcUid] ?? 0) > seq }
  }

  /// The index of the latest removal that covered `mcUid` (0: none).
  func removalMark(for mcUid: String) -> Int {
    state.withLock { max($0.lastRemoval[mcUid] ?? 0, $0.lastRemoveAll) }
  }

  /// The index of the save of the model numbered `seq`, if it was saved.
  func saveIndex(of seq: UInt64) -> Int? { state.withLock { $0.saves[seq] } }

  var counts: (reads: Int, saves: Int, removals: Int, removeAlls: Int) {
    state.withLock { ($0.reads, $0.saves.count, $0.removals, $0.removeAlls) }
  }

  func model(for key: AccountKey) async throws -> AuthModel? {
    state.withLock {
      $0.reads += 1
      return $0.models[key]
    }
  }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    let failed = state.withLock { state -> Bool in
      if failingSaves > 0, state.rng.chance(failingSaves) {
        state.failedSaves += 1
        return true
      }
      state.index += 1
      state.models[key] = model
      if let seq = model.extraInfo["seq"].flatMap(UInt64.init) {
        state.saves[seq] = state.index
        state.newestSaved[key.account] = max(state.newestSaved[key.account] ?? 0, seq)
      }
      return false
    }
    if failed { throw SaveFault() }
  }

  func removeModel(for key: AccountKey) async throws {
    state.withLock {
      $0.index += 1
      $0.removals += 1
      $0.models[key] = nil
      $0.lastRemoval[key.account] = $0.index
    }
  }

  func removeModels(forAccount account: String) async throws {
    state.withLock {
      $0.index += 1
      $0.removals += 1
      $0.models = $0.models.filter { $0.key.account != account }
      $0.lastRemoval[account] = $0.index
    }
  }

  func removeAll() async throws {
    state.withLock {
      $0.index += 1
      $0.removeAlls += 1
      $0.models.removeAll()
      $0.lastRemoveAll = $0.index
    }
  }
}
