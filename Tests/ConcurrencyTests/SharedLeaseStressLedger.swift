import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// One call the shared-lease stress made.
struct SharedStressCall: Sendable {
  let id: Int
  let process: Int
  let key: AccountKey
  let refresh: RefreshPolicy
  let timeout: Duration?
  /// The process's authorization deadline.
  let deadline: Duration
  let started: ContinuousClock.Instant
  /// The latest the call may end.
  let bound: Duration
  /// Models numbered up to this one were issued before a logout this process knew of when the
  /// call started.
  let logoutBarrier: UInt64
}

/// The lock-protected log of a shared-lease stress run: calls, logouts and what each process
/// heard of them, lease holders, authorizer calls in flight, and every invariant violation.
final class SharedStressLedger: Sendable {
  struct Holding: Sendable {
    var process: Int
    var fence: UInt64
    var expiresAt: Date
  }

  /// A refresh-token request: when it left, and whether its process held a live grant for the
  /// key when the coordinator handed it over and when it left.
  struct Send: Sendable {
    var left: ContinuousClock.Instant
    var liveAtEntry: Bool
    var liveAtLeft: Bool
  }

  struct Flight: Sendable {
    var process: Int
    var key: AccountKey
    var family: Int?
    var began: ContinuousClock.Instant
    var cancelled = false
    /// The call hangs past the maximum hold and never reaches the server (a fault).
    var hung = false
  }

  private struct State {
    var ends: [Int] = []
    var cancelledByDriver: [Bool] = []
    var calls: [Int: SharedStressCall] = [:]
    var finished = 0
    var outcomes: [String: Int] = [:]
    var lastSeen: [Int: [String: String]] = [:]
    /// [process][mcUid]: models numbered up to it were issued before a logout the process knew.
    var barrier: [Int: [String: UInt64]] = [:]
    /// Logouts under way: [process][mcUid] → the number issued just before each began.
    var pendingLogouts: [Int: [String: [UInt64]]] = [:]
    /// Sign-outs recorded in the lease: mcUid → (process, number issued before its logout).
    var announcements: [String: [(process: Int, issuedBefore: UInt64)]] = [:]
    var logoutsStarted = 0
    var logoutsFinished = 0
    var heardSignOuts = 0
    var holders: [AccountKey: Holding] = [:]
    var nextFlight = 0
    var flights: [Int: Flight] = [:]
    var overlapsAfterLapse = 0
    var overlapsWithAbandoned = 0
    var overlapsWithHung = 0
    var authorizedWithoutLiveLease = 0
    var worstOvershoot: Duration = .zero
    var worstInDeadlines = 0.0
    var violations: [String] = []
    var violationCount = 0
    var categories: [String: Int] = [:]
    /// Each refresh-token request: when it left, and whether its process held a live grant
    /// for the key when the coordinator handed it over and when it left.
    var sends: [String: Send] = [:]
    /// When each refresh token was first stored (a save that landed).
    var stored: [String: ContinuousClock.Instant] = [:]
    /// What the process that presented a spent refresh token had been through: caller → text.
    var reuseContext: [String: String] = [:]
  }

  /// A deposed holder with nothing servable in the store fails with `lease_lost` (rule 16).
  static let allowedCodes: Set<AuthCoordinatorError.Code> = [
    .timedOut, .signedOut, .authorizationFailed, .storeFailed, .leaseLost,
  ]

  private let state = LockedState(State())
  /// Signalled whenever a call, a logout, an authorizer call or a lease hold ends: what the
  /// driver waits on (for room in its window, and for the drain) instead of polling.
  let ended = ChangeSignal(watchdog: .seconds(600))
  let seedText: String

  init(seedText: String) { self.seedText = seedText }

  // MARK: - Calls

  func begin(
    process: Int, key: AccountKey, refresh: RefreshPolicy, timeout: Duration?,
    deadline: Duration, bound: Duration
  ) -> SharedStressCall {
    state.withLock { state in
      let call = SharedStressCall(
        id: state.ends.count, process: process, key: key, refresh: refresh, timeout: timeout,
        deadline: deadline, started: .now, bound: bound,
        logoutBarrier: state.barrier[process]?[key.account] ?? 0)
      state.ends.append(0)
      state.cancelledByDriver.append(false)
      state.calls[call.id] = call
      return call
    }
  }

  func markCancelled(_ id: Int) { state.withLock { $0.cancelledByDriver[id] = true } }

  func lastSeen(process: Int, mcUid: String) -> String? {
    state.withLock { $0.lastSeen[process]?[mcUid] }
  }

  func finish(
    _ call: SharedStressCall, _ result: Result<AuthModel, any Error>, issuer: SharedLeaseIssuer
  ) {
    let elapsed = call.started.duration(to: .now)
    var problems: [(String, String)] = []
    let outcome: String
    let where_ = "call \(call.id) (process \(call.process), \(call.key.account), \(call.refresh))"
    var served: String?
    switch result {
    case .success(let model):
      outcome = "served"
      served = model.accessToken
      if let (seq, family) = SharedLeaseIssuer.parse(model), model.mcUid == call.key.account {
        if seq <= call.logoutBarrier {
          problems.append(
            (
              "served from before a logout",
              "\(where_) got model #\(seq), issued before a logout this process knew of when "
                + "the call started (barrier #\(call.logoutBarrier))"
            ))
        } else if let born = issuer.born(family), born <= call.logoutBarrier {
          problems.append(
            (
              "served a signed-out session",
              "\(where_) got model #\(seq) of family \(family), a session that began (#\(born)) "
                + "before a logout this process knew of (barrier #\(call.logoutBarrier))"
            ))
        }
      } else {
        problems.append(("wrong model", "\(where_) got \(model.accessToken) for \(model.mcUid)"))
      }
      if case .force(let rejected?) = call.refresh, rejected == model.accessToken {
        problems.append(("rejected token served", "\(where_) got back the token it rejected"))
      }
    case .failure(let error as AuthCoordinatorError):
      outcome = error.code.rawValue
      if !Self.allowedCodes.contains(error.code) {
        problems.append(("unexpected error", "\(where_) failed with \(error)"))
      }
    case .failure(let error) where error is CancellationError:
      outcome = "cancelled"
    case .failure(let error):
      outcome = "other error"
      problems.append(("unexpected error", "\(where_) failed with \(type(of: error)): \(error)"))
    }
    if elapsed > call.bound {
      problems.append(
        ("late", "\(where_) ended after \(elapsed), past its bound \(call.bound) (\(outcome))"))
    }
    let allowed = call.timeout ?? .zero
    state.withLock { state in
      state.ends[call.id] += 1
      state.finished += 1
      if state.ends[call.id] > 1 {
        problems.append(("ended twice", "\(where_) ended \(state.ends[call.id]) times"))
      }
      if outcome == "cancelled", !state.cancelledByDriver[call.id] {
        problems.append(("unexpected error", "\(where_) got a CancellationError nobody asked for"))
      }
      if call.timeout != nil, elapsed - allowed > state.worstOvershoot {
        state.worstOvershoot = elapsed - allowed
      }
      if call.timeout == nil {
        state.worstInDeadlines = max(state.worstInDeadlines, elapsed / call.deadline)
      }
      if let served { state.lastSeen[call.process, default: [:]][call.key.account] = served }
      state.calls[call.id] = nil
      state.outcomes[outcome, default: 0] += 1
      Self.note(problems, in: &state)
    }
    ended.changed()
  }

  // MARK: - Logouts

  func logoutBegan(process: Int, mcUid: String, issuedBefore: UInt64) {
    state.withLock { state in
      state.logoutsStarted += 1
      state.pendingLogouts[process, default: [:]][mcUid, default: []].append(issuedBefore)
    }
  }

  func logoutReturned(process: Int, mcUid: String, issuedBefore: UInt64) {
    state.withLock { state in
      state.logoutsFinished += 1
      if let index = state.pendingLogouts[process]?[mcUid]?.firstIndex(of: issuedBefore) {
        state.pendingLogouts[process]?[mcUid]?.remove(at: index)
      }
      let old = state.barrier[process]?[mcUid] ?? 0
      state.barrier[process, default: [:]][mcUid] = max(old, issuedBefore)
    }
    ended.changed()
  }

  /// `process`'s coordinator recorded a sign-out of `mcUid` in the lease (it returned). Of the
  /// process's logouts of the user under way, the one that began first is the conservative
  /// guess of which one it was.
  func signOutRecorded(process: Int, mcUid: String) {
    state.withLock { state in
      guard let issuedBefore = state.pendingLogouts[process]?[mcUid]?.min() else { return }
      state.announcements[mcUid, default: []].append((process, issuedBefore))
    }
  }

  /// `process` emitted `.signedOutElsewhere(account:)`: every sign-out of the user by another
  /// process recorded so far is known to it from now on.
  func heardSignOut(process: Int, mcUid: String) {
    state.withLock { state in
      state.heardSignOuts += 1
      let known = (state.announcements[mcUid] ?? []).filter { $0.process != process }
        .map(\.issuedBefore).max()
      guard let known else { return }
      let old = state.barrier[process]?[mcUid] ?? 0
      state.barrier[process, default: [:]][mcUid] = max(old, known)
    }
  }

  // MARK: - Lease holders

  /// Leases held now: a flight gives its lease back after its result (a late one included) is
  /// stored, so none held means every save has landed.
  var leasesHeld: Int { state.withLock { $0.holders.count } }

  func held(_ key: AccountKey, process: Int, fence: UInt64, expiresAt: Date) {
    state.withLock { state in
      if let holder = state.holders[key], holder.fence > fence { return }
      state.holders[key] = Holding(process: process, fence: fence, expiresAt: expiresAt)
    }
  }

  /// Whether `process` is the last holder of `key`'s lease the ledger heard of (its grant may
  /// have lapsed since).
  func holdsLease(_ key: AccountKey, process: Int) -> Bool {
    state.withLock { $0.holders[key]?.process == process }
  }

  func released(_ key: AccountKey, fence: UInt64) {
    state.withLock { state in
      if state.holders[key]?.fence == fence { state.holders[key] = nil }
    }
    ended.changed()
  }

  // MARK: - Authorizer calls

  /// An authorizer call of `process` began. Checks that no other call of the same refresh family
  /// is in flight while its process holds a live lease for the key, and never one of the same
  /// process (rule 16). Returns the flight's id.
  func authorizationBegan(process: Int, key: AccountKey, family: Int?) -> Int {
    let now = Date()
    let began = ContinuousClock.now
    return state.withLock { state in
      let id = state.nextFlight
      state.nextFlight += 1
      let mine = state.holders[key]
      if mine?.process != process || mine.map({ $0.expiresAt <= now }) ?? true {
        state.authorizedWithoutLiveLease += 1
      }
      if let family {
        for other in state.flights.values where other.family == family {
          let holder = state.holders[key]
          let otherLive = holder.map { $0.process == other.process && $0.expiresAt > now } ?? false
          let text =
            "process \(process) began refreshing family \(family) of \(key.account) while process "
            + "\(other.process)'s refresh of it (began \(other.began.duration(to: began)) earlier, "
            + "cancelled: \(other.cancelled)) was in flight"
          if other.hung {
            // Abandoned after the maximum hold; it never reaches the server.
            state.overlapsWithHung += 1
          } else if other.process == process {
            Self.note([("refresh overlap", text + ", in the same process")], in: &state)
          } else if otherLive {
            Self.note([("refresh overlap", text + ", under its live lease")], in: &state)
          } else if other.cancelled {
            state.overlapsWithAbandoned += 1
          } else {
            state.overlapsAfterLapse += 1
          }
        }
      }
      state.flights[id] = Flight(process: process, key: key, family: family, began: began)
      return id
    }
  }

  func authorizationCancelled(_ id: Int) { state.withLock { $0.flights[id]?.cancelled = true } }

  func authorizationHangs(_ id: Int) { state.withLock { $0.flights[id]?.hung = true } }

  func authorizationEnded(_ id: Int) {
    _ = state.withLock { $0.flights.removeValue(forKey: id) }
    ended.changed()
  }

  var runningAuthorizations: Int { state.withLock { $0.flights.count } }

  // MARK: - Pauses and reuses

  /// A refresh-token request of `caller` left at `left`; `liveAtEntry` and `liveAtLeft` say
  /// whether its process held a live grant for the key when the coordinator handed the request
  /// to the authorizer and when it left (a pause, or a starved scheduler, may come between).
  func requestLeft(
    caller: String, at left: ContinuousClock.Instant, liveAtEntry: Bool, liveAtLeft: Bool
  ) {
    state.withLock {
      $0.sends[caller] = Send(left: left, liveAtEntry: liveAtEntry, liveAtLeft: liveAtLeft)
    }
  }

  /// The refresh-token request of `caller`, if it left.
  func send(of caller: String) -> Send? { state.withLock { $0.sends[caller] } }

  /// A save of a model carrying `refreshToken` landed, made by `process` for `key`. Only one
  /// made under a live grant counts: a deposed holder's fenced save may land (no later holder
  /// saved yet) after its successor read the store, and the successor then spends the token
  /// the deposed holder had spent, which is the contract's stated window, not a stale read.
  func stored(refreshToken: String?, key: AccountKey, process: Int) {
    guard let refreshToken, holdsLiveLease(key, process: process) else { return }
    let now = ContinuousClock.now
    state.withLock { state in
      if state.stored[refreshToken] == nil { state.stored[refreshToken] = now }
    }
  }

  /// The first time any of `refreshTokens` was stored, if ever.
  func firstStored(among refreshTokens: [String]) -> ContinuousClock.Instant? {
    state.withLock { state in refreshTokens.compactMap { state.stored[$0] }.min() }
  }

  /// Whether `process` holds a live grant for `key` now, as far as the ledger heard.
  func holdsLiveLease(_ key: AccountKey, process: Int) -> Bool {
    let now = Date()
    return state.withLock { state in
      state.holders[key].map { $0.process == process && $0.expiresAt > now } ?? false
    }
  }

  func noteReuse(by caller: String, context: String) {
    state.withLock { $0.reuseContext[caller] = context }
  }

  func reuseContext(of caller: String) -> String? { state.withLock { $0.reuseContext[caller] } }

  // MARK: - Violations and reading

  func violation(_ category: String, _ message: String) {
    state.withLock { Self.note([(category, message)], in: &$0) }
  }

  private static func note(_ problems: [(String, String)], in state: inout State) {
    state.violationCount += problems.count
    for (category, message) in problems {
      state.categories[category, default: 0] += 1
      if state.violations.count < 20 { state.violations.append("[\(category)] \(message)") }
    }
  }

  var started: Int { state.withLock { $0.ends.count } }
  var finished: Int { state.withLock { $0.finished } }
  var outstanding: Int {
    state.withLock { $0.ends.count - $0.finished + $0.logoutsStarted - $0.logoutsFinished }
  }
  var outstandingCalls: [Int] { state.withLock { Array($0.calls.keys) } }
  var logouts: (started: Int, finished: Int, heard: Int) {
    state.withLock { ($0.logoutsStarted, $0.logoutsFinished, $0.heardSignOuts) }
  }
  var outcomes: [String: Int] { state.withLock { $0.outcomes } }
  var overlaps: (afterLapse: Int, withAbandoned: Int, withHung: Int, withoutLiveLease: Int) {
    state.withLock {
      (
        $0.overlapsAfterLapse, $0.overlapsWithAbandoned, $0.overlapsWithHung,
        $0.authorizedWithoutLiveLease
      )
    }
  }
  var worstOvershoot: Duration { state.withLock { $0.worstOvershoot } }
  /// The longest a call without a timeout of its own took, in its process's deadlines.
  var worstInDeadlines: Double { state.withLock { $0.worstInDeadlines } }
  var violations: (count: Int, categories: [String: Int], first: [String]) {
    state.withLock { ($0.violationCount, $0.categories, $0.violations) }
  }

  func unfinished(limit: Int) -> [SharedStressCall] {
    state.withLock { Array($0.calls.values.sorted { $0.id < $1.id }.prefix(limit)) }
  }
}
