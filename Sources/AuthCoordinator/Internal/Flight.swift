import TokenStore

/// What the state machine needs of the handle it holds for a flight's effects: nothing but
/// whether a stopped flight's work was told to stop. It never looks further inside.
protocol FlightEffects: AnyObject, Equatable {
  /// The flight's work was cancelled (or never started): forgetting the key cannot let a new
  /// authorization start beside it.
  var workStopped: Bool { get }
}

/// What carries out one flight: its callers' queue, the queue of forced refreshes that ask
/// again once it ends, its task, the cross-process lease it holds, and, for a refresh stopped
/// but left to finish, the latch its task opens when it ended.
///
/// The state machine holds it (``AccountStateMachine/effects``) from the flight's start to its
/// ending, which hands it back; a stopped flight's stays in the machine's record of stopped
/// flights until its work is done with. Every variable is guarded by the stripe's lock.
final class Flight: FlightEffects, @unchecked Sendable {
  /// The key and the flight's number: kept here, so that the flight's task and each of its
  /// steps hold one reference for all three (an async frame keeps what lives across a
  /// suspension, and every live flight keeps its frames).
  let key: AccountKey
  let id: UInt64
  let queue: WaiterQueue
  /// Made when the first forced refresh must wait for the flight to end.
  var followers: WaiterQueue?
  /// The flight's task, set as it is created.
  var work: Task<Void, Never>?
  /// Made when the flight is stopped while its refresh goes on: a flight about to spend the
  /// same refresh token waits for it (opened when the task ended, or when the refresh is
  /// abandoned).
  var finished: Latch?
  /// Made when the flight is stopped before its work ended, or when a refresh left to finish
  /// is abandoned (the maximum hold) or discarded (a sign-out; the next flight's task cancels
  /// it); opened once its task's cancellation was delivered (its cancellation handlers ran,
  /// outside the stripe's lock). Every later flight of the key waits for it while the machine
  /// records the flight as cancelled: a new authorization never starts beside one whose
  /// handler has not run yet. (`Task.isCancelled` turns true before the handlers run, and a
  /// second `cancel()` returns while another thread is still running them.)
  var cancellation: Latch?
  /// The cross-process lease the flight holds (its grant, the hold its renewal shares, the task
  /// renewing it): used by the flight's task alone, one step at a time, never under the lock.
  /// The state machine decides when it is taken, confirmed and given back (its steps), and the
  /// hold (``LeaseHoldState``) whether it is still held. Without a lease, the coordinator's one
  /// shared record, which nothing writes to.
  let lease: AuthCoordinator.HeldLease
  /// The grant the flight holds, as its task last published it (after taking, confirming or
  /// giving back the lease): what a sign-out announcement asks the lease about.
  /// Out of line (``Rare``): a grant is 144 bytes, and a flight without a lease never has one.
  @Rare var publishedGrant: LeaseGrant?
  /// The flight's first step, from its start until its task takes it
  /// (``AuthCoordinator/runFlight(_:)``). Set before the task is made and taken by the task
  /// alone. Captured by the task's closure instead, the step and the store turn it holds (the
  /// read's latch) lived as long as the flight.
  var first: AuthCoordinator.FlightStep?

  init(
    key: AccountKey, id: UInt64, queue: WaiterQueue, lease: AuthCoordinator.HeldLease,
    first: AuthCoordinator.FlightStep
  ) {
    self.key = key
    self.id = id
    self.queue = queue
    self.lease = lease
    self.first = first
  }

  /// The first step, handed over once to the flight's task.
  func takeFirst() -> AuthCoordinator.FlightStep? {
    defer { first = nil }
    return first
  }

  var workStopped: Bool { cancellation?.isOpen ?? true }

  static func == (lhs: Flight, rhs: Flight) -> Bool { lhs === rhs }
}
