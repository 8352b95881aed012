import SyncPrimitives

/// The callers parked on one flight, in arrival order.
///
/// A caller reserves a slot under its stripe's lock (its ticket is the slot index), then parks
/// outside any lock on an unsafe continuation. Leaving early (cancellation or the caller's own timeout) is a
/// swap of that one slot under the lock: O(1), no task hop, and the flight goes on for the others.
/// When the flight ends, every parked caller is resumed outside the lock in slot order, so
/// waiters wake in the order they arrived (which also keeps task-group cleanup linear).
///
/// Each caller is resumed exactly once: whoever moves its slot to `.done` resumes it.
@usableFromInline
final class WaiterQueue: @unchecked Sendable {
  /// What a parked caller wakes up with.
  enum Outcome: Sendable {
    case success(AuthModel)
    case failure(any Error)
    /// The flight ended; ask the coordinator again (a forced refresh that had to wait for it).
    case retry
  }

  /// Why a caller left before the flight ended.
  @usableFromInline
  enum LeaveReason: Sendable {
    case cancelled
    case timedOut

    var error: any Error {
      switch self {
      case .cancelled: return CancellationError()
      case .timedOut: return AuthCoordinatorError.timedOut("the caller's own timeout elapsed")
      }
    }

    var wake: Wake {
      switch self {
      case .cancelled: return .cancelled
      case .timedOut: return .timedOut
      }
    }
  }

  /// Why a parked caller woke. One byte, so the parked frames stay small: the outcome itself
  /// (which holds a model) is read from the queue after waking.
  @usableFromInline
  enum Wake: Sendable {
    case finished
    case cancelled
    case timedOut
  }

  private enum Slot {
    /// Reserved, not parked yet.
    case reserved
    case parked(UnsafeContinuation<Wake, Never>)
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
  #if DEBUG
    /// Tests observe the order in which ``finish(_:)`` resumes tickets (set before finishing).
    /// Debug builds only: release builds carry no test hook.
    var resumeObserver: (@Sendable (Int) -> Void)?
  #endif

  /// - Parameters:
  ///   - counters: Where the number of waiting callers is kept.
  ///   - onLastLeft: Called (outside the lock) when the last active caller leaves early.
  init(counters: CoordinatorCounters, onLastLeft: @escaping @Sendable () -> Void = {}) {
    self.counters = counters
    self.onLastLeft = onLastLeft
  }

  /// Callers reserved or parked and not yet resumed.
  var activeCount: Int { lock.withLock { active } }

  /// Callers parked on a continuation now (O(n); for tests and diagnostics).
  var parkedCount: Int {
    lock.withLock {
      slots.reduce(0) { count, slot in
        if case .parked = slot { return count + 1 }
        return count
      }
    }
  }

  /// Reserves the next slot. Called under the stripe's lock.
  ///
  /// - Returns: The ticket, or `nil` when the queue is already finished.
  /// - Parameter coalesced: The caller joins a flight another caller started (counted in the
  ///   same update as its arrival).
  func reserve(coalesced: Bool = false) -> Int? {
    let ticket: Int? = lock.withLock {
      guard outcome == nil else { return nil }
      slots.append(.reserved)
      active += 1
      return slots.count - 1
    }
    if ticket != nil { counters.waiterArrived(coalesced: coalesced) }
    return ticket
  }

  /// The model a caller that woke with `wake` gets, or the error it throws.
  ///
  /// Out of line so that its temporaries stay off the parked caller's async frame.
  @inline(never)
  func result(of wake: Wake) throws -> AuthModel {
    switch wake {
    case .finished:
      switch finalOutcome {
      case .success(let model): return model
      case .failure(let error): throw error
      case .retry, nil:
        preconditionFailure("Internal inconsistency: a flight's waiter woke to \(wake)")
      }
    case .cancelled: throw LeaveReason.cancelled.error
    case .timedOut: throw LeaveReason.timedOut.error
    }
  }

  /// For a caller that waited for the flight to end: throws unless it ended (and so the caller
  /// asks again).
  @inline(never)
  func checkEnded(_ wake: Wake) throws {
    switch wake {
    case .finished:
      if case .failure(let error) = finalOutcome { throw error }
    case .cancelled: throw LeaveReason.cancelled.error
    case .timedOut: throw LeaveReason.timedOut.error
    }
  }

  /// Parks the caller holding `ticket` until the flight ends or the caller leaves.
  ///
  /// Runs in the caller's own context, holding no lock while parked. Cancellation of the calling task
  /// makes it return `.cancelled` at once.
  @inline(never)
  nonisolated(nonsending) func park(_ ticket: Int) async -> Wake {
    await withTaskCancellationHandler {
      await withUnsafeContinuation { park(ticket, $0) }
    } onCancel: {
      leave(ticket, .cancelled)
    }
  }

  /// Parks `continuation` in the slot of `ticket`, or resumes it at once when the flight ended
  /// or the caller left first: the body of ``park(_:)``'s continuation, which
  /// ``AuthCoordinator/authModel(for:refresh:timeout:)`` writes out.
  @usableFromInline
  func park(_ ticket: Int, _ continuation: UnsafeContinuation<Wake, Never>) {
    lock.lock()
    switch slots[ticket] {
    case .reserved:
      if outcome != nil {
        slots[ticket] = .done
        lock.unlock()
        continuation.resume(returning: .finished)
      } else {
        slots[ticket] = .parked(continuation)
        lock.unlock()
      }
    case .left(let reason):
      slots[ticket] = .done
      lock.unlock()
      continuation.resume(returning: reason.wake)
    case .parked, .done:
      lock.unlock()
      preconditionFailure("Internal inconsistency: waiter \(ticket) parked twice")
    }
  }

  /// The outcome, for callers resumed with `.finished`.
  ///
  /// Read without the lock: it is written once, under the lock, before any caller is resumed
  /// with `.finished`, and never written again; a continuation's resumption orders the reader
  /// after that write (the Swift runtime tells ThreadSanitizer so too). Taking the lock here made
  /// every waking caller contend for it.
  var finalOutcome: Outcome? { outcome }

  /// Makes the caller holding `ticket` leave early, unless the flight already ended.
  @usableFromInline
  func leave(_ ticket: Int, _ reason: LeaveReason) {
    lock.lock()
    guard outcome == nil else {
      lock.unlock()
      return
    }
    let continuation: UnsafeContinuation<Wake, Never>?
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
    continuation?.resume(returning: reason.wake)
    if wasLast { onLastLeft() }
  }

  /// Ends the queue with `outcome` if no caller is waiting, atomically with respect to
  /// ``reserve()``: a caller that reserves afterwards is refused (and asks the state machine again), so an
  /// abandoned flight's cancellation never reaches a later caller.
  ///
  /// - Returns: Whether the queue was idle and is now finished.
  func closeIfIdle(_ outcome: Outcome) -> Bool {
    lock.withLock {
      guard self.outcome == nil, active == 0 else { return false }
      self.outcome = outcome
      return true
    }
  }

  /// Ends the queue: every caller still waiting gets `outcome`, in arrival order.
  ///
  /// - Returns: How many callers were still waiting.
  @discardableResult
  func finish(_ outcome: Outcome) -> Int {
    let sealed = seal(outcome)
    sealed.resume()
    return sealed.count
  }

  /// The callers a sealed queue still has to resume, in arrival order.
  struct Sealed {
    fileprivate var parked: [(ticket: Int, continuation: UnsafeContinuation<Wake, Never>)] = []
    /// How many callers were still waiting when the queue was sealed.
    var count = 0
    #if DEBUG
      fileprivate var observer: (@Sendable (Int) -> Void)?
    #endif

    /// Resumes them. Call it holding no lock.
    func resume() {
      for (ticket, continuation) in parked {
        #if DEBUG
          observer?(ticket)
        #endif
        continuation.resume(returning: .finished)
      }
    }
  }

  /// Ends the queue with `outcome` and takes out the callers to resume, without resuming them:
  /// the coordinator seals under its stripe's lock (so the flight's closing event can say how
  /// many callers it served, in order with the key's other events) and resumes after releasing
  /// it.
  func seal(_ outcome: Outcome) -> Sealed {
    lock.lock()
    guard self.outcome == nil else {
      lock.unlock()
      return Sealed()
    }
    self.outcome = outcome
    let waiting = active
    active = 0
    var parked: [(ticket: Int, continuation: UnsafeContinuation<Wake, Never>)] = []
    parked.reserveCapacity(waiting)
    for index in slots.indices {
      if case .parked(let continuation) = slots[index] {
        parked.append((index, continuation))
        slots[index] = .done
      }
    }
    var sealed = Sealed(parked: parked, count: waiting)
    #if DEBUG
      sealed.observer = resumeObserver
    #endif
    lock.unlock()
    counters.waitersResumed(waiting)
    return sealed
  }
}
