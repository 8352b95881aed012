import AuthCoordinator
import SyncPrimitives

/// An in-memory ``TokenStore`` that numbers every operation in the order it ran.
///
/// The stress test uses the numbers to check logout against the store's own order: once the
/// removal a logout issued has run, a caller that starts afterwards may only be given a model
/// that was saved after that removal (rule 9), and every model a caller gets was saved before
/// the caller was resumed (rule 10, the store never fails here).
final class RecordingStore: TokenStore, @unchecked Sendable {
  private struct State {
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

  private let state = LockedState(State())

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
    state.withLock {
      $0.index += 1
      $0.models[key] = model
      if let seq = model.extraInfo["seq"].flatMap(UInt64.init) { $0.saves[seq] = $0.index }
    }
  }

  func removeModel(for key: AccountKey) async throws {
    state.withLock {
      $0.index += 1
      $0.removals += 1
      $0.models[key] = nil
      $0.lastRemoval[key.mcUid] = $0.index
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
