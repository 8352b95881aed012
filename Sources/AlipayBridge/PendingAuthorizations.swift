import AuthCoordinator

/// The decisions of ``AlipayAuthCodeProvider``: which pending request a callback completes,
/// when a waiter resumes, when a return without a callback abandons a request.
///
/// A value type with no effects: every event is a `mutating func` returning what the provider
/// must do (resume this waiter, emit this event, start or cancel this grace timer). The provider
/// calls it under its lock and carries the actions out after unlocking. Generic over the waiter
/// and the timer so tests can drive it synchronously with plain values.
struct PendingAuthorizations<Waiter, Timer> {
  typealias Outcome = Result<AuthCode, AuthCoordinatorError>

  /// How far the bounce to Alipay has got.
  enum Phase: Equatable {
    /// Registered; the auth URL is being built.
    case preparing
    /// The opener was called and has not returned yet.
    case opening
    /// The opener returned `true`.
    case opened
  }

  /// How a request ended, remembered to tell duplicates from late callbacks.
  enum Ending: Equatable {
    /// A callback completed it.
    case completed
    /// It ended without a callback (cancelled, abandoned, failed to open, builder failed).
    case ended
  }

  fileprivate struct Entry {
    var phase: Phase = .preparing
    /// The outcome a callback delivered before the waiter parked.
    var delivered: Outcome?
    /// Set when the request ended before the waiter parked (cancelled or abandoned).
    var endedEarly: (any Error)?
    var waiter: Waiter?
    var graceToken: UInt64?
    var graceTimer: Timer?
  }

  /// What to do with a waiter that wants to park.
  enum WaitAction {
    /// Resume it at once with this result.
    case resume(Result<AuthCode, any Error>)
    /// It parked; a later event resumes it.
    case parked
  }

  /// What a delivered callback does.
  enum DeliverAction {
    /// Resume `waiter` with `outcome` (and cancel `timer`); the callback matched `requestID`.
    case resume(Waiter, Outcome, requestID: String, cancelTimer: Timer?)
    /// The callback matched `requestID`; the outcome was kept for the waiter (cancel `timer`).
    case kept(requestID: String, cancelTimer: Timer?)
    /// The callback completed nothing.
    case reject(BridgeEvent.RejectReason, requestID: String?)
  }

  /// What a cancellation does.
  struct CancelAction {
    /// The waiter to resume with `CancellationError`, if it had parked.
    var waiter: Waiter?
    /// The grace timer to cancel, if one was armed.
    var cancelTimer: Timer?
  }

  /// What an expired grace timer does.
  enum GraceAction {
    /// Nothing: the request finished, or the timer was disarmed or replaced.
    case none
    /// Resume `waiter` with an abandoned error; report `requestID` abandoned.
    case abandon(Waiter, requestID: String)
    /// The waiter has not parked yet; it will get the abandoned error when it does.
    case abandonedBeforeParking(requestID: String)
  }

  private var entries: [String: Entry] = [:]
  private var endings: [String: Ending] = [:]
  private var endingOrder: [String] = []
  private var endingCursor = 0
  private var nextGraceToken: UInt64 = 0
  /// How many finished request ids are remembered to classify duplicates and late callbacks.
  let rememberedEndings: Int

  init(rememberedEndings: Int = 128) {
    precondition(rememberedEndings > 0, "rememberedEndings must be positive")
    self.rememberedEndings = rememberedEndings
  }

  /// The ids of the pending requests, sorted.
  var pendingIDs: [String] { entries.keys.sorted() }

  /// Registers a request; `false` when the id is already pending.
  mutating func register(_ id: String) -> Bool {
    guard entries[id] == nil else { return false }
    entries[id] = Entry()
    endings[id] = nil
    return true
  }

  /// Moves a request to `phase`; `false` when it is gone or has ended early.
  mutating func advance(_ id: String, to phase: Phase) -> Bool {
    guard entries[id] != nil, entries[id]!.endedEarly == nil else { return false }
    entries[id]!.phase = phase
    return true
  }

  /// The waiter of `id` wants to park.
  mutating func park(_ id: String, _ waiter: Waiter) -> WaitAction {
    guard var entry = entries[id] else {
      preconditionFailure("Internal inconsistency: parking on unknown request")
    }
    if let error = entry.endedEarly {
      finish(id, as: .ended)
      return .resume(.failure(error))
    }
    if let delivered = entry.delivered {
      finish(id, as: .completed)
      return .resume(delivered.mapError { $0 })
    }
    entry.waiter = waiter
    entries[id] = entry
    return .parked
  }

  /// The request ended without a waiter to resume (the opener failed, the builder threw);
  /// returns the grace timer to cancel.
  mutating func remove(_ id: String) -> Timer? {
    guard let entry = entries[id] else { return nil }
    finish(id, as: entry.delivered == nil ? .ended : .completed)
    return entry.graceTimer
  }

  /// The task waiting for `id` was cancelled.
  mutating func cancel(_ id: String) -> CancelAction {
    guard var entry = entries[id] else { return CancelAction() }
    if let waiter = entry.waiter {
      finish(id, as: .ended)
      return CancelAction(waiter: waiter, cancelTimer: entry.graceTimer)
    }
    if entry.endedEarly == nil { entry.endedEarly = CancellationError() }
    let timer = entry.graceTimer
    entry.graceTimer = nil
    entry.graceToken = nil
    entries[id] = entry
    return CancelAction(waiter: nil, cancelTimer: timer)
  }

  /// A callback naming `requestID` (or none) arrived with `outcome`.
  mutating func deliver(
    requestID: String?, conflicting: Bool, outcome: Outcome
  ) -> DeliverAction {
    if conflicting { return .reject(.conflictingRequestIDs, requestID: nil) }
    guard let id = requestID, !id.isEmpty else { return .reject(.missingRequestID, requestID: nil) }
    guard var entry = entries[id] else {
      switch endings[id] {
      case .completed?: return .reject(.duplicate, requestID: id)
      case .ended?: return .reject(.late, requestID: id)
      case nil: return .reject(.unknownRequestID, requestID: id)
      }
    }
    if entry.endedEarly != nil { return .reject(.late, requestID: id) }
    if entry.delivered != nil { return .reject(.duplicate, requestID: id) }
    let timer = entry.graceTimer
    if let waiter = entry.waiter {
      finish(id, as: .completed)
      return .resume(waiter, outcome, requestID: id, cancelTimer: timer)
    }
    entry.delivered = outcome
    entry.graceTimer = nil
    entry.graceToken = nil
    entries[id] = entry
    return .kept(requestID: id, cancelTimer: timer)
  }

  /// The app became active: arms a grace timer for every request whose URL was opened (or is
  /// being opened) that has no outcome and no armed timer. Returns the (id, token) pairs to
  /// start timers for; attach each with ``attach(_:token:timer:)``.
  mutating func becameActive() -> [(id: String, token: UInt64)] {
    var armed: [(id: String, token: UInt64)] = []
    for id in entries.keys.sorted() {
      let entry = entries[id]!
      guard entry.phase != .preparing, entry.delivered == nil, entry.endedEarly == nil,
        entry.graceToken == nil
      else { continue }
      nextGraceToken += 1
      entries[id]!.graceToken = nextGraceToken
      armed.append((id, nextGraceToken))
    }
    return armed
  }

  /// Keeps the timer started for `token`; `false` when the request no longer expects it (the
  /// caller cancels the timer).
  mutating func attach(_ id: String, token: UInt64, timer: Timer) -> Bool {
    guard entries[id]?.graceToken == token else { return false }
    entries[id]!.graceTimer = timer
    return true
  }

  /// The app resigned active again: disarms every grace timer; returns them to cancel.
  mutating func resignedActive() -> [Timer] {
    var timers: [Timer] = []
    for id in entries.keys {
      if let timer = entries[id]!.graceTimer { timers.append(timer) }
      entries[id]!.graceTimer = nil
      entries[id]!.graceToken = nil
    }
    return timers
  }

  /// The grace timer `token` of `id` ran out.
  mutating func graceExpired(_ id: String, token: UInt64) -> GraceAction {
    guard var entry = entries[id], entry.graceToken == token, entry.delivered == nil,
      entry.endedEarly == nil
    else { return .none }
    if let waiter = entry.waiter {
      finish(id, as: .ended)
      return .abandon(waiter, requestID: id)
    }
    entry.endedEarly = Self.abandonedError
    entry.graceTimer = nil
    entry.graceToken = nil
    entries[id] = entry
    return .abandonedBeforeParking(requestID: id)
  }

  /// The error of a request abandoned after the app became active.
  static var abandonedError: AuthCoordinatorError {
    AuthCoordinatorError(
      .abandoned, "the user came back from Alipay and no callback followed within the grace period")
  }

  private mutating func finish(_ id: String, as ending: Ending) {
    entries[id] = nil
    if endings.updateValue(ending, forKey: id) != nil { return }
    if endingOrder.count < rememberedEndings {
      endingOrder.append(id)
    } else {
      endings[endingOrder[endingCursor]] = nil
      endingOrder[endingCursor] = id
      endingCursor = (endingCursor + 1) % rememberedEndings
    }
  }
}

extension PendingAuthorizations: Sendable where Waiter: Sendable, Timer: Sendable {}
extension PendingAuthorizations.Entry: Sendable where Waiter: Sendable, Timer: Sendable {}
