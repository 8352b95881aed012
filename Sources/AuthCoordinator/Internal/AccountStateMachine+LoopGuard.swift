// The refresh-loop guard (semantics rule 6): how many counted authorizations a key may start in
// the window, and what happens beyond it: refused for an interactive authorizer, delayed with a
// doubling back-off for a silent one.

extension AccountStateMachine {
  /// The refresh-loop guard: records an authorization it counts unless too many started
  /// within the window. Beyond the limit, an interactive authorizer's is refused; a
  /// non-interactive one's is delayed (the `n`-th beyond the limit by `loopBackoff · 2^(n-1)`,
  /// at most `maxLoopBackoff`) and recorded at the instant it will start.
  mutating func admitLoopGuardedAuthorization(now: Duration) -> LoopGuardDecision {
    let windowStart = now - policy.loopWindow
    loopGuardStarts.removeAll { $0 <= windowStart }
    let beyond = loopGuardStarts.count - policy.maxForcedAuthorizations + 1
    guard beyond > 0 else {
      loopGuardStarts.append(now)
      return .admitted
    }
    guard !policy.interactiveAuthorizer else { return .refused }
    let delay = Self.backoff(beyond, first: policy.loopBackoff, limit: policy.maxLoopBackoff)
    loopGuardStarts.append(CoordinatorClock.deadline(after: delay, from: now))
    return .delayed(delay)
  }

  /// The delay of the `n`-th authorization beyond the loop limit (`n` ≥ 1): `first · 2^(n-1)`,
  /// at most `limit`.
  static func backoff(_ n: Int, first: Duration, limit: Duration) -> Duration {
    let limit = min(max(limit, .zero), CoordinatorClock.longestWait)
    var delay = min(max(first, .zero), limit)
    guard delay > .zero else { return .zero }
    // O(1) whatever `n` (a count may come from a lease record): at most the doublings that
    // reach the limit, which a `Duration` bounds.
    var doublings = max(n, 1) - 1
    while doublings > 0, delay < limit {
      delay *= 2
      doublings -= 1
    }
    return min(delay, limit)
  }

  /// A flight whose authorization the loop guard delayed: it waits, with no deadline (its
  /// callers' own timeouts and cancellation apply), then prepares to authorize as usual.
  mutating func backOff(
    _ id: UInt64, _ delay: Duration, reason: AuthorizationReason, rejecting rejected: Set<String>,
    now: Duration
  ) -> Step {
    state = .preparing(
      Preparing(id: id, reason: reason, rejectedTokens: rejected, stage: .backingOff))
    return Step(
      kind: .backOff(until: CoordinatorClock.deadline(after: delay, from: now), delay: delay),
      deadline: nil)
  }

  func loopGuardError() -> AuthCoordinatorError {
    AuthCoordinatorError(
      .refreshLoop,
      "more than \(policy.maxForcedAuthorizations) forced refreshes (or renewals of tokens "
        + "shorter than the refresh leeway) of \(key) within \(policy.loopWindow); not "
        + "starting another authorization")
  }
}
