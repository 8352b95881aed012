import AuthCoordinator
import SyncPrimitives

/// One request the stress driver made, with what was known just before it started.
struct StressCall: Sendable {
  let id: Int
  let key: AccountKey
  let refresh: RefreshPolicy
  let timeout: Duration?
  /// ``RecordingStore/removalMark(for:)`` when the call started.
  let removalMark: Int
  /// The highest model sequence number issued before a logout of this key began, for the
  /// logouts that had returned when the call started.
  let logoutBarrier: UInt64
}

/// The lock-protected log of a stress run: every call's end, counted, and every invariant
/// violation, described.
///
/// The checks that need only the call's own result run in ``finish(_:_:store:authorizer:)``,
/// as each call ends; the driver checks the rest (hangs, statistics) at the end of the run.
final class StressLedger: @unchecked Sendable {
  /// The coordinator errors a stress call may legitimately end with. The store never fails
  /// here, but the driver moves the clock past store deadlines too (a load still queued when
  /// the clock jumps fails with `store_failed`, the store deadline's code).
  static let allowedCodes: Set<AuthCoordinatorError.Code> = [
    .timedOut, .signedOut, .refreshLoop, .authorizationFailed, .userCancelled, .storeFailed,
  ]

  private struct State {
    var ends: [UInt8] = []
    var cancelledByDriver: [Bool] = []
    var calls: [StressCall?] = []
    var finished = 0
    var logoutsStarted = 0
    var logoutsFinished = 0
    var barrier: [String: UInt64] = [:]
    var barrierAll: UInt64 = 0
    var lastToken: [String: String] = [:]
    var outcomes: [String: Int] = [:]
    var violations: [String] = []
    var violationCount = 0
    /// Models served before their save finished (the save ran past the store deadline): each
    /// must still reach the store by the end of the run.
    var unsavedAtResume: [(call: Int, mcUid: String, seq: UInt64, storeIndex: Int)] = []
    var servedBeforeSaved = 0
    var diagnoses = 0
    /// The first violations' accounts and calls, the trail's snapshot of the coordinator's
    /// events asked for then, and the account's timeline at that moment.
    var pendingDiagnoses: [(account: String, call: Int, snapshot: Int, timeline: String)] = []
  }

  private let state = LockedState(State())

  /// The codes a call may fail with: ``allowedCodes``, `lease_lost` in a run with a lease (a
  /// flight whose grant lapsed in the clock's jumps three times gives up, rule 22), and
  /// `network_error` with a silent authorizer.
  let allowed: Set<AuthCoordinatorError.Code>

  /// The coordinator's events, when the run records them (`STRESS_EVENTS=1`): the first few
  /// violations of calls come with them and with their account's timeline.
  let trail: EventTrail?

  init(
    expectedCalls: Int, lease: Bool = false, silent: Bool = false, trail: EventTrail? = nil
  ) {
    self.trail = trail
    var allowed = Self.allowedCodes
    if lease { allowed.insert(.leaseLost) }
    // A silent authorizer's transient failures reach the callers after the retries.
    if silent { allowed.insert(.networkError) }
    self.allowed = allowed
    state.withLock {
      $0.ends.reserveCapacity(expectedCalls)
      $0.cancelledByDriver.reserveCapacity(expectedCalls)
      $0.calls.reserveCapacity(expectedCalls)
    }
  }

  // MARK: - Driver side

  /// Registers a new call and returns its description, snapshots included.
  func begin(
    key: AccountKey, refresh: RefreshPolicy, timeout: Duration?, store: RecordingStore
  ) -> StressCall {
    // The removal mark is read before the barrier is: both only grow, and either may be older
    // than the call's start, never newer, so neither check can raise a false alarm.
    let removalMark = store.removalMark(for: key.account)
    StressTimeline.shared.note(
      key.account, "call begins (\(refresh)), after store op \(store.index)")
    return state.withLock { state in
      let call = StressCall(
        id: state.ends.count, key: key, refresh: refresh, timeout: timeout,
        removalMark: removalMark,
        logoutBarrier: max(state.barrier[key.account] ?? 0, state.barrierAll))
      state.ends.append(0)
      state.cancelledByDriver.append(false)
      state.calls.append(call)
      return call
    }
  }

  /// Notes that the driver is about to cancel call `id`'s task.
  func markCancelled(_ id: Int) { state.withLock { $0.cancelledByDriver[id] = true } }

  /// The last token served for `mcUid`, to reject in a named forced refresh.
  func lastToken(_ mcUid: String) -> String? { state.withLock { $0.lastToken[mcUid] } }

  func logoutBegan() { state.withLock { $0.logoutsStarted += 1 } }

  /// A logout returned; `issuedBefore` is the highest sequence number issued before it began.
  func logoutReturned(_ mcUid: String?, issuedBefore: UInt64) {
    state.withLock { state in
      state.logoutsFinished += 1
      if let mcUid {
        state.barrier[mcUid] = max(state.barrier[mcUid] ?? 0, issuedBefore)
      } else {
        state.barrierAll = max(state.barrierAll, issuedBefore)
      }
    }
  }

  // MARK: - Call side

  /// Records the end of `call` and checks what can be checked from its result alone.
  func finish(
    _ call: StressCall, _ result: Result<AuthModel, any Error>, store: RecordingStore,
    authorizer: ChaosAuthorizer
  ) {
    StressTimeline.shared.note(
      call.key.account, "call \(call.id) ended: \(Self.describe(result))")
    var problems: [String] = []
    let outcome: String
    var servedToken: String?
    let mcUid = call.key.account
    switch result {
    case .success(let model):
      outcome = "served"
      servedToken = model.accessToken
      let parts = model.accessToken.split(separator: "|")
      guard model.mcUid == mcUid, model.extraInfo["key"] == mcUid, parts.count == 3,
        parts[1] == mcUid, let seq = UInt64(parts[2])
      else {
        problems.append("call \(call.id) for \(mcUid) got a model of \(model.mcUid)")
        break
      }
      if let reason = authorizer.forbiddenReason(seq) {
        problems.append("call \(call.id) for \(mcUid) got model #\(seq), \(reason)")
      }
      if seq <= call.logoutBarrier {
        problems.append(
          "call \(call.id) for \(mcUid) got model #\(seq), issued before a logout that had "
            + "returned when the call started (barrier #\(call.logoutBarrier))")
      }
      if let saved = store.saveIndex(of: seq) {
        if saved <= call.removalMark {
          problems.append(
            "call \(call.id) for \(mcUid) got model #\(seq), saved (store op \(saved)) before "
              + "a removal (store op \(call.removalMark)) that ran before the call started")
        }
      } else {
        // Rule 10 with the store deadline: a save that runs past it still serves the model,
        // and must complete later (checked at the end of the run).
        state.withLock {
          $0.unsavedAtResume.append((call.id, mcUid, seq, store.index))
          $0.servedBeforeSaved += 1
        }
      }
      if case .force(let rejected?) = call.refresh, rejected == model.accessToken {
        problems.append("forced refresh \(call.id) for \(mcUid) got back the token it rejected")
      }
    case .failure(let error as AuthCoordinatorError):
      outcome = error.code.rawValue
      if !allowed.contains(error.code) {
        problems.append("call \(call.id) for \(mcUid) failed with unexpected \(error)")
      }
    case .failure(let error) where error is CancellationError:
      outcome = "cancelled"
    case .failure(let error):
      outcome = "other error"
      problems.append("call \(call.id) for \(mcUid) failed with unexpected \(type(of: error))")
    }
    state.withLock { state in
      state.ends[call.id] &+= 1
      state.finished += 1
      if state.ends[call.id] > 1 {
        problems.append("call \(call.id) for \(mcUid) ended \(state.ends[call.id]) times")
      }
      if outcome == "cancelled", !state.cancelledByDriver[call.id] {
        problems.append("call \(call.id) for \(mcUid) got a CancellationError it never asked for")
      }
      if let servedToken { state.lastToken[mcUid] = servedToken }
      state.calls[call.id] = nil
      state.outcomes[outcome, default: 0] += 1
      if let trail, !problems.isEmpty, state.diagnoses < 3 {
        state.diagnoses += 1
        state.pendingDiagnoses.append(
          (
            mcUid, call.id, trail.requestSnapshot(of: mcUid),
            "\(mcUid) when call \(call.id) ended, the timeline:\n  "
              + StressTimeline.shared.lines(of: mcUid).joined(separator: "\n  ")
          ))
      }
      Self.note(problems, in: &state)
    }
  }

  private static func describe(_ result: Result<AuthModel, any Error>) -> String {
    switch result {
    case .success(let model): "served #\(model.extraInfo["seq"] ?? "?")"
    case .failure(let error): String(String(describing: error).prefix(100))
    }
  }

  /// Records a violation found outside a call (statistics, hangs).
  func violation(_ message: String) { state.withLock { Self.note([message], in: &$0) } }

  /// Whether a model served before it was stored is settled: stored, superseded by a newer
  /// stored model of the user, or removed by a logout that ran after it was served.
  private static func settled(
    _ entry: (call: Int, mcUid: String, seq: UInt64, storeIndex: Int), _ store: RecordingStore
  ) -> Bool {
    store.saveIndex(of: entry.seq) != nil || store.storedNewer(than: entry.seq, for: entry.mcUid)
      || store.removalMark(for: entry.mcUid) > entry.storeIndex
  }

  /// The models served before their save finished that were never settled (the ones that
  /// were are forgotten).
  func servedButNeverSaved(_ store: RecordingStore) -> [String] {
    state.withLock { state in
      state.unsavedAtResume.removeAll { Self.settled($0, store) }
      return state.unsavedAtResume.prefix(20).map {
        "call \($0.call) for \($0.mcUid) got model #\($0.seq), which never reached the store"
      }
    }
  }

  /// How many models served before their save finished have still not been saved.
  func unsavedCount(_ store: RecordingStore) -> Int {
    state.withLock { state in
      state.unsavedAtResume.removeAll { Self.settled($0, store) }
      return state.unsavedAtResume.count
    }
  }

  /// How many models were served before their save finished.
  var servedBeforeSaved: Int { state.withLock { $0.servedBeforeSaved } }

  private static func note(_ problems: [String], in state: inout State) {
    state.violationCount += problems.count
    for problem in problems where state.violations.count < 20 { state.violations.append(problem) }
  }

  /// The diagnoses of the first violations, with the coordinator's events up to each (the
  /// trail's subscriber lags behind, so this is read at the end of the run).
  func diagnoses() -> [String] {
    guard let trail else { return [] }
    return state.withLock { $0.pendingDiagnoses }.map { entry in
      entry.timeline + "\n\(entry.account), the coordinator's events until call \(entry.call) "
        + "ended (and up to 5,000 after, the subscriber's lag):\n  "
        + trail.snapshot(entry.snapshot).joined(separator: "\n  ")
    }
  }

  // MARK: - Reading

  var started: Int { state.withLock { $0.ends.count } }
  var finished: Int { state.withLock { $0.finished } }
  var outstanding: Int {
    state.withLock { $0.ends.count - $0.finished + $0.logoutsStarted - $0.logoutsFinished }
  }
  var logouts: (started: Int, finished: Int) {
    state.withLock { ($0.logoutsStarted, $0.logoutsFinished) }
  }
  var outcomes: [String: Int] { state.withLock { $0.outcomes } }
  var violations: (count: Int, first: [String]) {
    state.withLock { ($0.violationCount, $0.violations) }
  }
  var cancellationsIssued: Int { state.withLock { $0.cancelledByDriver.count { $0 } } }

  /// The calls that have not ended, first few.
  func unfinished(limit: Int) -> [StressCall] {
    state.withLock { state in
      var found: [StressCall] = []
      for case let call? in state.calls where state.ends[call.id] == 0 {
        found.append(call)
        if found.count == limit { break }
      }
      return found
    }
  }
}
