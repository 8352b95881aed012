import Foundation
import TokenStore

// What memory keeps of a model: its adoption, the leeway it gets, and the rule that a model
// that expired before it could be served (a flight stalled past a short token's life) is not.
extension AccountStateMachine {
  /// Caches a model an authorization produced at `date`; `unsaved` when its save failed, with
  /// the lease grant it was obtained under (``Cached/obtainedUnder``).
  mutating func adopt(
    _ model: AuthModel, obtainedAt date: Date, unsaved: Bool = false, under grant: LeaseGrant? = nil
  ) {
    var cached = cached(model, from: date)
    cached.leeway = Self.leeway(
      policy.refreshLeeway, forModelExpiring: model.expiresAt, obtainedAt: date)
    cached.arrivedInsideLeeway =
      model.expiresAt.map { $0.timeIntervalSince(date) <= policy.refreshLeeway } ?? false
    cached.unsaved = unsaved
    cached.obtainedUnder = unsaved ? grant : nil
    cache = .model(cached)
    recovered()
  }

  /// How memory keeps a model that arrived at `date` (read from the store, unless ``adopt(_:obtainedAt:unsaved:)``
  /// refines it for a model just obtained): the configured leeway, and when a refresh ahead is
  /// due.
  func cached(_ model: AuthModel, from date: Date) -> Cached {
    Cached(
      model: model, leeway: policy.refreshLeeway, arrivedInsideLeeway: false,
      refreshAheadAt: refreshAheadDate(for: model, arrivedAt: date))
  }

  /// The leeway for a model obtained at `date`: the configured one, but never more than half
  /// the lifetime the model arrived with, so a fresh model is served for at least half of that
  /// lifetime instead of counting as expired on arrival. A model that arrived already expired
  /// gets no leeway (it is expired anyway).
  static func leeway(
    _ configured: TimeInterval, forModelExpiring expiresAt: Date?, obtainedAt date: Date
  ) -> TimeInterval {
    guard let expiresAt else { return configured }
    let lifetime = expiresAt.timeIntervalSince(date)
    return min(configured, max(lifetime, 0) / 2)
  }

  /// Whether `model` has expired at `date`: a flight that stalled (a process paused, a store
  /// that took its time) past a short token's life never serves it (rule 10).
  static func expired(_ model: AuthModel, at date: Date) -> Bool {
    model.expiresAt.map { $0 <= date } ?? false
  }

  /// What the waiters of a flight get whose model expired before it could be served: a
  /// transient error. The model is stored and cached all the same (it holds the rotated
  /// refresh token), and the next request refreshes it.
  func expiredBeforeServed() -> AuthCoordinatorError {
    AuthCoordinatorError(
      .timedOut,
      "the token obtained for \(key) expired before it could be served (the flight stalled "
        + "past its lifetime); ask again to refresh it", transient: true)
  }
}
