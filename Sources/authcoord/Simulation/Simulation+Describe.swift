import AlipayBridge
import AuthCoordinator
import Foundation

// The timeline's lines for the coordinator's and the bridge's events. Events never carry a
// token, so neither do these lines.
extension Simulation {
  /// What a simulated process's coordinator did, named after the process (`--processes N`).
  static func describe(
    _ event: AuthEvent, in process: SimulatedProcess, ledger: SharedLedger
  ) -> String? {
    if case .adoptedFromStore(let key, let flight) = event {
      let writer = ledger.writer(of: key).map { $0 == "app" ? "the app" : $0 } ?? "another process"
      return
        "\(process.name) adopted the model \(writer) stored for \(key.mcUid) (flight #\(flight))"
    }
    return describe(event).map { "\(process.name): \($0)" }
  }

  static func describe(_ event: AuthEvent) -> String? {
    switch event {
    case .flightStarted(let key, let flight):
      return "flight #\(flight) for \(key.mcUid) started"
    case .authorizationStarted(let key, let flight, let reason):
      return "flight #\(flight): authorizing \(key.mcUid) (\(reason))"
    case .flightSucceeded(let key, let flight, let waiters):
      return "flight #\(flight) for \(key.mcUid) succeeded: \(waiters) waiting callers served"
    case .flightFailed(let key, let flight, let code, _):
      return "flight #\(flight) for \(key.mcUid) failed: \(code)"
    case .flightTimedOut(let key, let flight, let phase):
      return "flight #\(flight) for \(key.mcUid) timed out in the \(phase.rawValue) phase"
    case .flightCancelled(let key, let flight, let reason):
      return "flight #\(flight) for \(key.mcUid) cancelled (\(reason.rawValue))"
    case .lateResultDiscarded(let key, let flight):
      return "a late result for flight #\(flight) (\(key.mcUid)) was discarded"
    case .lateResultSaved(let key, let flight):
      return "a late result for flight #\(flight) (\(key.mcUid)) was stored, not served"
    case .adoptedFromStore(let key, let flight):
      return "flight #\(flight) adopted the model another process stored for \(key.mcUid)"
    case .signedOutElsewhere(let mcUid):
      return "signed out in another process: \(mcUid ?? "everyone")"
    case .refreshLoopStopped(let key):
      return "loop guard: not bouncing \(key.mcUid) to Alipay again"
    case .refreshLoopBackedOff(let key, let delay):
      return "loop guard: the next authorization of \(key.mcUid) waits \(delay)"
    case .storeFailed(_, let operation, let message):
      return "store \(operation.rawValue) failed: \(message)"
    case .accountStatusChanged(let change):
      return "account status changed: \(change)"
    case .modelUnsaved(let key, _, _):
      return "the save of \(key.mcUid)'s model failed: kept in memory, retried"
    case .saveRetryFailed(let key, let attempt, _):
      return "retry \(attempt) of \(key.mcUid)'s save failed"
    case .unsavedModelSaved(let key):
      return "\(key.mcUid)'s unsaved model is stored"
    case .leaseLost(let key, _):
      return "the lease of \(key.mcUid) was lost: the result is not stored"
    case .leaseHoldEnded(let key, _):
      return "the lease of \(key.mcUid) was held for the maximum hold: given up"
    case .refreshAbandoned(let key, _):
      return "a stopped refresh of \(key.mcUid) ran past the maximum hold: abandoned"
    case .refreshAheadStarted(let key, let flight):
      return "flight #\(flight): refreshing \(key.mcUid) ahead of expiry, in the background"
    case .retryScheduled(let key, let flight, let attempt, let delay, let code):
      return "flight #\(flight): \(code) for \(key.mcUid); attempt \(attempt) after \(delay)"
    case .staleServed(let key, let flight):
      return "flight #\(flight) failed: \(key.mcUid)'s cached model, not yet expired, is served"
    case .cooldownEntered(let key, let code, let duration):
      return "\(key.mcUid) remembers \(code) for \(duration)"
    case .evicted, .unsavedModelDropped, .serverClockOffsetUpdated, .signOutRevocation:
      return nil
    }
  }

  static func describe(_ event: BridgeEvent) -> String? {
    switch event {
    case .callbackMatched: return "callback matched the pending request"
    case .callbackRejected(let reason, _): return "callback rejected (\(reason))"
    case .abandonedAfterReturn: return "the user came back without a callback: abandoned"
    case .opened, .openFailed: return nil
    }
  }
}
