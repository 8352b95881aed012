import Foundation

// Reports of flights that are no longer the key's current one: a stopped refresh's late result
// is stored (a rotated refresh token must not be lost) unless the user signed out since, and
// adopted by memory if it is newer; anything else is discarded.
extension AccountStateMachine {
  /// The stopped flights whose authorizer is still running with a result that may be stored:
  /// a flight about to spend the same refresh token waits for them.
  var predecessors: [UInt64] { outstanding.filter { $0.value }.map(\.key).sorted() }

  /// How a flight stopped while authorizing ends: a refresh in progress is left to finish and
  /// its result stored; any other authorizer's result is discarded.
  mutating func stopped(_ authorizing: Authorizing, _ ending: Ending) -> Ending {
    guard authorizing.spendsRefreshToken else { return ending }
    var ending = ending
    ending.letsRefreshFinish = true
    ending.abandonAt = authorizing.startedAt + policy.maximumHold
    outstanding[authorizing.id] = true
    return ending
  }

  /// A report of a flight that is no longer the key's current one.
  mutating func stale(_ id: UInt64, _ outcome: StepOutcome, date: Date) -> AdvanceAction {
    switch outcome {
    case .authorized(let result):
      guard outstanding.removeValue(forKey: id) == true, case .success(let model) = result else {
        return .discardLateResult
      }
      outstanding[id] = true  // until stored: a new refresh still waits for it
      return .persistLateResult(model)
    case .lateResultSaved(let model):
      // Stored, unless the user signed out meanwhile (here or elsewhere).
      guard outstanding.removeValue(forKey: id) == true, let model else { return .ignore }
      if isNewer(model, at: date) { adopt(model, obtainedAt: date) }
      return .ignore
    case .lateResultUnsaved(let model):
      staleSaveFailed(model, date: date, lateResultOf: id)
      return .ignore
    case .saveFailed(let model):
      // The save deadline passed before the save failed: the model was served and cached.
      staleSaveFailed(model, date: date, lateResultOf: nil)
      return .ignore
    default:
      return .ignore
    }
  }

  /// Whether a late result should replace what memory holds.
  func isNewer(_ model: AuthModel, at date: Date) -> Bool {
    switch cache {
    case .unknown: return false  // the next request reads the store, which holds it
    case .empty: return true
    case .model(let cached):
      if !cached.model.isValid(at: date, leeway: cached.leeway) { return true }
      return (model.expiresAt ?? .distantFuture) > (cached.model.expiresAt ?? .distantFuture)
    }
  }
}
