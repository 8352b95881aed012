import SyncPrimitives

/// The callers parked on one flight, in arrival order.
///
/// A caller reserves a slot on the actor (its ticket is the slot index), then parks outside the
/// actor on an unsafe continuation. Leaving early (cancellation or the caller's own timeout) is a
/// swap of that one slot under the lock: O(1), no task hop, and the flight goes on for the others.
/// When the flight ends, every parked caller is resumed outside the lock in slot order, so
/// waiters wake in the order they arrived (which also keeps task-group cleanup linear).
///
/// Each caller is resumed exactly once: whoever moves its slot to `.done` resumes it.
final class WaiterQueue: @unchecked Sendable {
  /// What a parked caller wakes up with.
  enum Outcome: Sendable {
    case success(AuthModel)
    case failure(any Error)
    /// The flight ended; ask the coordinator again (a forced refresh that had to wait for it).
    case retry
  }

  /// Why a caller left before the flight ended.
  enum LeaveReason: Sendable {
    case cancelled
    case timedOut

    var error: any Error {
      switch self {
      case .cancelled: return CancellationError()
      case .timedOut: return AuthCoordinatorError.timedOut("the caller's own timeout elapsed")
      }
    }
  }

  private enum Slot {
    /// Reserved on the actor, not parked yet.
    case reserved
    case parked(UnsafeContinuation<Outcome, Never>)
    /// Left before parking; it fails as soon as it tries to park.
    case left(LeaveReason)
    /// Resumed (or about to be, outside the lock).
    case done
  }

  private let lock = Lock()
  private var slots: [Slot] = []
  private var outcome: Outcome?
  private var active = 0
  private let counters: CoordinatorCounters
  private let onLastLeft: @Sendable () -> Void

  /// - Parameters:
  ///   - counters: Where the number of waiting callers is kept.
  ///   - onLastLeft: Called (outside the lock) when the last active caller leaves early.
  init(counters: CoordinatorCounters, onLastLeft: @escaping @Sendable () -> Void = {}) {
    self.counters = counters
    self.onLastLeft = onLastLeft
  }

  /// Callers reserved or parked and not yet resumed.
  var activeCount: Int { lock.withLock { active } }

  /// Whether the queue has been finished.
  var isFinished: Bool { lock.withLock { outcome != nil } }

  /// Reserves the next slot. Called on the actor.
  ///
  /// - Returns: The ticket, or `nil` when the queue is already finished.
  func reserve() -> Int? {
    let ticket: Int? = lock.withLock {
      guard outcome == nil else { return nil }
      slots.append(.reserved)
      active += 1
      return slots.count - 1
    }
    if ticket != nil { counters.waiterArrived() }
    return ticket
  }

  /// Parks the caller holding `ticket` until the flight ends or the caller leaves.
  ///
  /// Runs in the caller's own context (not on the actor). Cancellation of the calling task
  /// makes it return `.failure(CancellationError())` at once.
  func wait(_ ticket: Int) async -> Outcome {
    await withTaskCancellationHandler {
      await withUnsafeContinuation { (continuation: UnsafeContinuation<Outcome, Never>) in
        lock.lock()
        switch slots[ticket] {
        case .reserved:
          if let outcome {
            slots[ticket] = .done
            lock.unlock()
            continuation.resume(returning: outcome)
          } else {
            slots[ticket] = .parked(continuation)
            lock.unlock()
          }
        case .left(let reason):
          slots[ticket] = .done
          lock.unlock()
          continuation.resume(returning: .failure(reason.error))
        case .parked, .done:
          lock.unlock()
          preconditionFailure("Internal inconsistency: waiter \(ticket) parked twice")
        }
      }
    } onCancel: {
      leave(ticket, .cancelled)
    }
  }

  /// Makes the caller holding `ticket` leave early, unless the flight already ended.
  func leave(_ ticket: Int, _ reason: LeaveReason) {
    lock.lock()
    guard outcome == nil else {
      lock.unlock()
      return
    }
    let continuation: UnsafeContinuation<Outcome, Never>?
    switch slots[ticket] {
    case .reserved:
      slots[ticket] = .left(reason)
      continuation = nil
    case .parked(let parked):
      slots[ticket] = .done
      continuation = parked
    case .left, .done:
      lock.unlock()
      return
    }
    active -= 1
    let wasLast = active == 0
    lock.unlock()
    counters.waiterLeftEarly()
    continuation?.resume(returning: .failure(reason.error))
    if wasLast { onLastLeft() }
  }

  /// Ends the queue: every caller still waiting gets `outcome`, in arrival order.
  ///
  /// - Returns: How many callers were still waiting.
  @discardableResult
  func finish(_ outcome: Outcome) -> Int {
    lock.lock()
    guard self.outcome == nil else {
      lock.unlock()
      return 0
    }
    self.outcome = outcome
    let waiting = active
    active = 0
    var parked: [UnsafeContinuation<Outcome, Never>] = []
    parked.reserveCapacity(waiting)
    for index in slots.indices {
      if case .parked(let continuation) = slots[index] {
        parked.append(continuation)
        slots[index] = .done
      }
    }
    lock.unlock()
    counters.waitersResumed(waiting)
    for continuation in parked { continuation.resume(returning: outcome) }
    return waiting
  }
}
