import AuthCoordinator
import AuthCoordinatorTestKit
import Foundation
import SyncPrimitives

/// What one call into ``ChaosAuthorizer`` does.
enum ChaosFault: String, CaseIterable, Sendable, Comparable {
  /// Returns a model at once.
  case succeed
  /// Sleeps on the manual clock for less than the authorization deadline, then returns a model
  /// (honours cancellation).
  case succeedLater
  /// Enters the exchange phase, sleeps there (sometimes past the exchange deadline), then
  /// returns a model (honours cancellation).
  case succeedInExchange
  /// Throws (an arbitrary error or a `userCancelled` coordinator error).
  case fail
  /// Suspends until its task is cancelled (by the deadline, a logout or the last waiter leaving).
  case hang
  /// Ignores cancellation and answers after its deadline: the result must be discarded.
  case answerLate
  /// Returns a model for another user: the coordinator must refuse it.
  case wrongUser

  static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// An ``Authorizer`` that injects faults and checks rule 1 from the inside.
///
/// Every model it issues carries a global sequence number (in the token, `tok|<account>|<seq>`,
/// and in `extraInfo["seq"]`), the key it was issued for (`extraInfo["key"]`), and is numbered in
/// the order the authorizer returned it.
///
/// **The "one authorization in flight per key" invariant it checks.** A call is *in flight* from
/// the moment it enters ``authorize(_:)`` until it returns or until its task is cancelled,
/// whichever comes first. The coordinator cancels the task of every flight it stops (deadline,
/// logout, last waiter gone), and rule 8 says such an abandoned call no longer counts, even if it
/// ignores the cancellation and keeps running. So when a call enters, no other call for the same
/// key may be in flight. Registration and deregistration both happen inside the call's
/// `withTaskCancellationHandler` scope, so a cancellation is always seen before the coordinator
/// can start the next flight (the next flight of a key starts its first step only once the
/// stopped flight's cancellation has been delivered).
///
/// It also records which models were returned *after* their call was cancelled: those came from
/// stopped flights and must never reach a caller.
///
/// **Refresh tokens (`refreshTokens`, `STRESS_REFRESH=1`).** Every model then carries a refresh
/// token, `rt|<account>|<seq>`, and a call whose ``AuthorizationRequest/replacing`` model has one
/// spends it, as a refresh-token grant at a server that rotates them would: a call that issues a
/// model has rotated the token it was given. Rule 16 says such a token is never sent again, so a
/// later call that presents it is a violation, unless the call that rotated it was cancelled
/// before it issued (a logout or the maximum hold let go of it: documented as not guaranteed) or
/// issued a model for another user (which the coordinator must refuse). A call whose fault fails
/// spent nothing; its token may be sent again. A refresh token of another account is a violation
/// too, and so is a refresh whose task is cancelled early with no logout of its key begun
/// since, or pending when it began: a refresh is left to finish, and only a logout or the
/// maximum hold cancels it.
///
/// **A silent authorizer (`silent`, `STRESS_SILENT=1`).** It is not interactive and brings the
/// recommended ``SilentRefreshPolicy`` with stale-if-error on: refreshes ahead of expiry,
/// retries of transient failures after a back-off, remembered failures. Half its failures are
/// then transient (`network_error`), a third of those with a `Retry-After` of 1-20 s.
final class ChaosAuthorizer: Authorizer, @unchecked Sendable {
  struct Weights: Sendable {
    var table: [(ChaosFault, Double)] = [
      (.succeed, 30), (.succeedLater, 20), (.succeedInExchange, 10), (.fail, 12), (.hang, 10),
      (.answerLate, 12), (.wrongUser, 6),
    ]
  }

  struct ChaosError: Error {}

  private final class CallState: @unchecked Sendable {
    let key: String
    /// The refresh token the call spends, if any.
    let presented: String?
    let reason: AuthorizationReason
    let began: ManualClock.Instant
    // Guarded by the authorizer's lock.
    var registered = false
    var cancelled = false
    /// The logouts of the key, and of everyone, begun when the call began.
    var logouts = (key: 0, all: 0)
    /// Whether a logout of the key or of everyone had begun and not returned when the call
    /// began: the coordinator may not have heard of it yet.
    var logoutPending = false
    init(
      key: String, presented: String?, reason: AuthorizationReason, began: ManualClock.Instant
    ) {
      self.key = key
      self.presented = presented
      self.reason = reason
      self.began = began
    }
  }

  private struct State {
    var nextSeq: UInt64 = 0
    var callsPerKey: [String: UInt64] = [:]
    var inFlightPerKey: [String: Int] = [:]
    var running = 0
    var faults: [ChaosFault: Int] = [:]
    var abandoned: Set<UInt64> = []
    var misdirected: Set<UInt64> = []
    var overlaps: [String] = []
    var overlapCount = 0
    /// Refresh tokens that a call rotated (it issued a model), with that model's number and
    /// why the call was made.
    var rotated: [String: (seq: UInt64, reason: AuthorizationReason)] = [:]
    /// The models whose rotations were undone by a later call that sent the same token.
    var respentModels: [UInt64] = []
    var refreshSpends = 0
    var respent: [String] = []
    var respentCount = 0
    /// Logouts begun, per key and of everyone (``noteLogout(of:)``).
    var logoutsPerKey: [String: Int] = [:]
    var logoutsOfAll = 0
    /// Logouts begun and not yet returned, per key and of everyone.
    var pendingLogoutsPerKey: [String: Int] = [:]
    var pendingLogoutsOfAll = 0
    var maxInFlightKeys = 0
  }

  private let state = LockedState(State())
  private let seed: UInt64
  private let clock: ManualClock
  private let authorizationTimeout: Duration
  private let exchangeTimeout: Duration
  private let weights: Weights
  private let refreshTokens: Bool
  /// The store's recent operations on an account, added to a refresh violation's report.
  /// Set before the run starts.
  var storeHistory: (@Sendable (String) -> [String])?
  private let silent: Bool
  /// The wall clock that expiries are counted from (the manual clock's date unless stepped).
  private let now: @Sendable () -> Date

  init(
    seed: UInt64, clock: ManualClock, authorizationTimeout: Duration, exchangeTimeout: Duration,
    weights: Weights = Weights(), refreshTokens: Bool = false, silent: Bool = false,
    now: (@Sendable () -> Date)? = nil
  ) {
    self.refreshTokens = refreshTokens
    self.silent = silent
    self.now = now ?? clock.dateSource
    self.seed = seed
    self.clock = clock
    self.authorizationTimeout = authorizationTimeout
    self.exchangeTimeout = exchangeTimeout
    self.weights = weights
  }

  // MARK: - What the test reads

  /// The highest sequence number issued so far (0: none).
  var issuedSeq: UInt64 { state.withLock { $0.nextSeq } }
  /// Calls still running, abandoned ones included.
  var runningCalls: Int { state.withLock { $0.running } }
  /// How many calls did what.
  var faults: [ChaosFault: Int] { state.withLock { $0.faults } }
  /// Calls made in total.
  var callCount: Int { state.withLock { $0.faults.values.reduce(0, +) } }
  /// Rule 1 violations seen (and the first few described).
  var overlaps: (count: Int, first: [String]) { state.withLock { ($0.overlapCount, $0.overlaps) } }
  /// The most keys that had an authorization in flight at the same moment.
  var maxInFlightKeys: Int { state.withLock { $0.maxInFlightKeys } }
  /// The models whose refresh token was rotated and then sent again (their rotation undone).
  var respentModels: [UInt64] { state.withLock { $0.respentModels } }
  /// Calls that presented a refresh token.
  var refreshSpends: Int { state.withLock { $0.refreshSpends } }
  /// Refresh tokens presented again after a call rotated them, or refreshes cancelled that
  /// should have been left to finish (and the first few described).
  var respent: (count: Int, first: [String]) {
    state.withLock { ($0.respentCount, $0.respent) }
  }
  /// Models returned after their call was cancelled.
  var abandonedCount: Int { state.withLock { $0.abandoned.count } }

  /// Why a model with this sequence number must never reach a caller, if it must not.
  func forbiddenReason(_ seq: UInt64) -> String? {
    state.withLock { state in
      if state.abandoned.contains(seq) { return "returned after its call was cancelled" }
      if state.misdirected.contains(seq) { return "issued for another user" }
      return nil
    }
  }

  // MARK: - Authorizer

  var isInteractive: Bool { !silent }

  var silentRefresh: SilentRefreshPolicy? {
    guard silent else { return nil }
    var policy = SilentRefreshPolicy.recommended
    policy.servesStaleOnError = true
    return policy
  }

  /// Notes that a logout of `account` (`nil`: of everyone) begins, before the coordinator
  /// hears of it: a refresh it cancels is not a violation.
  func noteLogout(of account: String?) {
    state.withLock { state in
      if let account {
        state.logoutsPerKey[account, default: 0] += 1
        state.pendingLogoutsPerKey[account, default: 0] += 1
      } else {
        state.logoutsOfAll += 1
        state.pendingLogoutsOfAll += 1
      }
    }
  }

  /// Notes that a logout noted by ``noteLogout(of:)`` returned.
  func noteLogoutReturned(of account: String?) {
    state.withLock { state in
      if let account {
        state.pendingLogoutsPerKey[account, default: 0] -= 1
      } else {
        state.pendingLogoutsOfAll -= 1
      }
    }
  }

  /// Before this long after it began, a refresh may be cancelled only by a logout: the maximum
  /// hold (``StressDriver/refreshMaximumHold``, 500 s from the coordinator's call) is further
  /// off, even if the clock took steps (200 s at most each) between that call and this one.
  static let earliestAbandonment = Duration.seconds(100)

  func authorize(_ request: AuthorizationRequest) async throws -> AuthModel {
    let presented = refreshTokens ? request.replacing?.refreshToken : nil
    let call = CallState(
      key: request.key.account, presented: presented, reason: request.reason, began: clock.now)
    return try await withTaskCancellationHandler {
      let fault = register(call, presenting: presented)
      defer { deregister(call) }
      return try await run(fault, request, presented: presented)
    } onCancel: {
      let now = clock.now
      state.withLock { state in
        guard !call.cancelled else { return }
        call.cancelled = true
        StressTimeline.shared.note(call.key, "authorizer: call (\(call.reason)) cancelled")
        guard call.registered else { return }
        // Rule 16: a refresh is left to finish; only a logout or the maximum hold cancels it.
        if let token = call.presented, !call.logoutPending,
          state.logoutsPerKey[call.key, default: 0] == call.logouts.key,
          state.logoutsOfAll == call.logouts.all,
          call.began.duration(to: now) < Self.earliestAbandonment
        {
          state.respentCount += 1
          if state.respent.count < 10 {
            state.respent.append(
              "key \(call.key): the refresh spending \(token) was cancelled "
                + "\(call.began.duration(to: now)) after it began, with no logout since or pending")
          }
        }
        let left = state.inFlightPerKey[call.key, default: 0] - 1
        state.inFlightPerKey[call.key] = left == 0 ? nil : left
      }
    }
  }

  private func register(_ call: CallState, presenting token: String?) -> (ChaosFault, UInt64) {
    state.withLock { state in
      call.registered = true
      call.logouts = (state.logoutsPerKey[call.key, default: 0], state.logoutsOfAll)
      call.logoutPending =
        state.pendingLogoutsPerKey[call.key, default: 0] > 0 || state.pendingLogoutsOfAll > 0
      if let token {
        state.refreshSpends += 1
        var problem: String?
        let account = token.split(separator: "|").dropFirst().first.map(String.init)
        if let (seq, reason) = state.rotated[token] {
          problem =
            "key \(call.key): refresh token \(token) sent again (\(call.reason)), after a call "
            + "(\(reason)) rotated it (it issued model #\(seq))"
          state.respentModels.append(seq)
          if let storeHistory {
            problem! +=
              "; the store's last operations on the account: "
              + storeHistory(call.key).joined(separator: ", ")
          }
        } else if account != call.key {
          problem = "key \(call.key): given refresh token \(token) of another account"
        }
        if let problem {
          state.respentCount += 1
          if state.respent.count < 10 { state.respent.append(problem) }
        }
      }
      state.running += 1
      let index = state.callsPerKey[call.key, default: 0]
      state.callsPerKey[call.key] = index + 1
      let draw = SplitMix64.hash(seed, SplitMix64.hash(string: call.key), index)
      let fault = pick(draw)
      state.faults[fault, default: 0] += 1
      StressTimeline.shared.note(
        call.key,
        "authorizer: call (\(call.reason)) presenting \(token ?? "-"): \(fault)"
          + (call.cancelled ? " (cancelled before it began)" : ""))
      if !call.cancelled {
        let others = state.inFlightPerKey[call.key, default: 0]
        if others > 0 {
          state.overlapCount += 1
          if state.overlaps.count < 10 {
            state.overlaps.append("key \(call.key): \(others) other authorization(s) in flight")
          }
        }
        state.inFlightPerKey[call.key] = others + 1
        state.maxInFlightKeys = max(state.maxInFlightKeys, state.inFlightPerKey.count)
      }
      return (fault, draw)
    }
  }

  private func deregister(_ call: CallState) {
    state.withLock { state in
      state.running -= 1
      if !call.cancelled {
        call.cancelled = true  // no longer in flight either way
        let left = state.inFlightPerKey[call.key, default: 0] - 1
        state.inFlightPerKey[call.key] = left == 0 ? nil : left
      }
    }
  }

  private func pick(_ draw: UInt64) -> ChaosFault {
    let total = weights.table.reduce(0) { $0 + $1.1 }
    var point = Double(draw >> 11) / Double(1 << 53) * total
    for (fault, weight) in weights.table {
      if point < weight { return fault }
      point -= weight
    }
    return .succeed
  }

  private func run(
    _ choice: (ChaosFault, UInt64), _ request: AuthorizationRequest, presented: String?
  ) async throws -> AuthModel {
    let (fault, draw) = choice
    var rng = SplitMix64(seed: draw)
    let key = request.key
    // Every model issued below rotates the presented token, except one for another user.
    func issue(for key: AccountKey, rng: inout SplitMix64) -> AuthModel {
      self.issue(
        for: key, rng: &rng, rotating: fault == .wrongUser ? nil : presented,
        reason: request.reason)
    }
    switch fault {
    case .succeed:
      return issue(for: key, rng: &rng)
    case .succeedLater:
      let limit = Int(authorizationTimeout.components.seconds) * 8 / 10
      try await clock.sleep(for: .seconds(Int.random(in: 1...max(limit, 1), using: &rng)))
      return issue(for: key, rng: &rng)
    case .succeedInExchange:
      try await clock.sleep(for: .seconds(Int.random(in: 0...5, using: &rng)))
      let limit = Int(exchangeTimeout.components.seconds)
      let inExchange = Duration.seconds(Int.random(in: 1...(limit * 3 / 2), using: &rng))
      return try await request.exchange {
        try await clock.sleep(for: inExchange)
        return issue(for: key, rng: &rng)
      }
    case .fail:
      if silent, rng.chance(50) {
        throw AuthCoordinatorError(
          .networkError, "chaos: the token endpoint did not answer", transient: true,
          retryAfter: rng.chance(33) ? .seconds(Int.random(in: 1...20, using: &rng)) : nil)
      }
      if rng.chance(30) { throw AuthCoordinatorError(.userCancelled, "chaos: the user said no") }
      throw ChaosError()
    case .hang:
      try await clock.sleep(for: .seconds(1_000_000_000))
      throw ChaosError()  // unreachable in practice: only cancellation ends the sleep
    case .answerLate:
      // A task of its own, so this call's cancellation does not end the sleep.
      let extra = Duration.seconds(Int.random(in: 1...60, using: &rng))
      let wake = clock.now.advanced(by: authorizationTimeout + extra)
      let clock = self.clock
      await Task { try? await clock.sleep(until: wake) }.value
      return issue(for: key, rng: &rng)
    case .wrongUser:
      var model = issue(for: key, rng: &rng)
      model.mcUid = "not-" + key.account
      state.withLock { _ = $0.misdirected.insert(UInt64(model.extraInfo["seq"]!)!) }
      return model
    }
  }

  /// A new model for `key`, numbered; marked abandoned if the call was already cancelled.
  private func issue(
    for key: AccountKey, rng: inout SplitMix64, rotating presented: String?,
    reason: AuthorizationReason
  ) -> AuthModel {
    let cancelled = Task.isCancelled
    let seq = state.withLock { state -> UInt64 in
      state.nextSeq += 1
      StressTimeline.shared.note(
        key.account,
        "authorizer: issued #\(state.nextSeq)\(cancelled ? " after its cancellation" : "")")
      if cancelled { state.abandoned.insert(state.nextSeq) }
      if !cancelled, let presented { state.rotated[presented] = (state.nextSeq, reason) }
      return state.nextSeq
    }
    let lifetime = Double(Int.random(in: 90...900, using: &rng))
    let expiresAt: Date? = rng.chance(35) ? nil : now().addingTimeInterval(lifetime)
    return AuthModel(
      uid: "2088" + String(seq), accessToken: "tok|\(key.account)|\(seq)", mcUid: key.account,
      expiresAt: expiresAt, extraInfo: ["seq": String(seq), "key": key.account],
      refreshToken: refreshTokens ? "rt|\(key.account)|\(seq)" : nil)
  }
}
