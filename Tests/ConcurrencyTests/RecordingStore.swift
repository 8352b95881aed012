import AuthCoordinator
import AuthCoordinatorTestKit
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
///
/// `slowness` makes a share of its operations wait on a ``ManualClock`` first (a slow disk or
/// database; `STRESS_SLOW_STORE`), some past the coordinator's store deadline, before they act.
///
/// It takes part in the lease's fencing (``FencedTokenStore``) as `InMemoryTokenStore` does for
/// saves: a fenced save is refused when a save with a larger fence wrote the key's current
/// model. It matters only to a run with a lease (`STRESS_LEASE=1`); without one, no save
/// carries a fence.
final class RecordingStore: FencedTokenStore, @unchecked Sendable {
  struct SaveFault: Error {}

  fileprivate struct State {
    var rng: SplitMix64
    var failedSaves = 0
    /// Per user, the highest model number stored.
    var newestSaved: [String: UInt64] = [:]
    var models: [AccountKey: AuthModel] = [:]
    /// The fence of the fenced save that wrote each key's current model.
    var fences: [AccountKey: UInt64] = [:]
    var refusedFencedSaves = 0
    /// The last operations on each account's keys, for a violation's report.
    var recent: [String: [String]] = [:]
    var slowOperations = 0
    var index = 0
    var lastRemoval: [String: Int] = [:]
    var lastRemoveAll = 0
    /// Model sequence number to the index of its save.
    var saves: [UInt64: Int] = [:]
    var reads = 0
    var removals = 0
    var removeAlls = 0
  }

  /// Which operations wait on the clock first, and for how long at most.
  struct Slowness: Sendable {
    var percent: Double
    var clock: ManualClock
    var longest: Duration
  }

  private let state: LockedState<State>
  let failingSaves: Double
  let slowness: Slowness?

  init(failingSaves: Double = 0, seed: UInt64 = 0, slowness: Slowness? = nil) {
    self.failingSaves = failingSaves
    self.slowness = slowness
    state = LockedState(State(rng: SplitMix64(seed: seed)))
  }

  /// How many operations waited on the clock.
  var slowOperations: Int { state.withLock { $0.slowOperations } }

  /// Waits on the clock first, for a share of the operations. A cancelled wait ends early and
  /// the operation goes on, as a store's write already sent would.
  private func delay() async {
    guard let slowness else { return }
    let wait = state.withLock { state -> Duration? in
      guard state.rng.chance(slowness.percent) else { return nil }
      state.slowOperations += 1
      let longest = Int(slowness.longest.components.seconds)
      return .seconds(Int.random(in: 1...max(longest, 1), using: &state.rng))
    }
    if let wait { try? await slowness.clock.sleep(for: wait) }
  }

  /// The last operations on `account`'s keys, oldest first (`removeAll`s are not listed).
  func recentHistory(of account: String) -> [String] {
    state.withLock { $0.recent[account] ?? [] }
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
    await delay()
    return state.withLock {
      $0.reads += 1
      let model = $0.models[key]
      $0.note(
        "read \(model?.extraInfo["seq"].map { "#" + $0 } ?? "nothing") (after op \($0.index))",
        for: key.account)
      return model
    }
  }

  var refusedFencedSaves: Int { state.withLock { $0.refusedFencedSaves } }

  func save(_ model: AuthModel, for key: AccountKey) async throws {
    await delay()
    _ = try write(model, for: key, fence: nil)
  }

  func save(_ model: AuthModel, for key: AccountKey, fence: UInt64) async throws -> Bool {
    await delay()
    return try write(model, for: key, fence: fence)
  }

  private func write(_ model: AuthModel, for key: AccountKey, fence: UInt64?) throws -> Bool {
    enum Answer { case failed, refused, stored }
    let answer = state.withLock { state -> Answer in
      let seq = model.extraInfo["seq"] ?? "?"
      if failingSaves > 0, state.rng.chance(failingSaves) {
        state.failedSaves += 1
        state.note("save #\(seq) failed", for: key.account)
        return .failed
      }
      if let fence, state.models[key] != nil, let landed = state.fences[key], landed > fence {
        state.refusedFencedSaves += 1
        state.note("save #\(seq) refused by the fence", for: key.account)
        return .refused
      }
      state.index += 1
      state.note("op \(state.index): save #\(seq)", for: key.account)
      state.models[key] = model
      if let fence { state.fences[key] = fence }
      if let seq = model.extraInfo["seq"].flatMap(UInt64.init) {
        state.saves[seq] = state.index
        state.newestSaved[key.account] = max(state.newestSaved[key.account] ?? 0, seq)
      }
      return .stored
    }
    switch answer {
    case .failed: throw SaveFault()
    case .refused: return false
    case .stored: return true
    }
  }

  func removeModel(for key: AccountKey) async throws {
    await delay()
    state.withLock {
      $0.index += 1
      $0.removals += 1
      $0.models[key] = nil
      $0.fences[key] = nil
      $0.lastRemoval[key.account] = $0.index
      $0.note("op \($0.index): removal", for: key.account)
    }
  }

  func removeModels(forAccount account: String) async throws {
    await delay()
    state.withLock {
      $0.index += 1
      $0.removals += 1
      $0.models = $0.models.filter { $0.key.account != account }
      $0.fences = $0.fences.filter { $0.key.account != account }
      $0.lastRemoval[account] = $0.index
      $0.note("op \($0.index): removal", for: account)
    }
  }

  func removeAll() async throws {
    await delay()
    state.withLock {
      $0.index += 1
      $0.removeAlls += 1
      $0.models.removeAll()
      $0.fences.removeAll()
      $0.lastRemoveAll = $0.index
      StressTimeline.shared.note("*", "store: op \($0.index): removeAll")
    }
  }
}

extension RecordingStore.State {
  /// Keeps the last 24 operations of each account.
  mutating func note(_ entry: String, for account: String) {
    StressTimeline.shared.note(account, "store: " + entry)
    recent[account, default: []].append(entry)
    if recent[account]!.count > 24 { recent[account]!.removeFirst() }
  }
}
