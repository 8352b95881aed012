import SyncPrimitives

/// Holds the calls that pass through it while it is closed, until the test opens it: a test
/// double's save, lease call or sign-out held at a seam while the test acts in the gap.
///
/// ```swift
/// let gate = Gate()
/// gate.close()
/// // In the double: await gate.pass() before the call goes on.
/// let logout = Task { await coordinator.accountStatusChanged(.logout(account: "u1")) }
/// try await gate.waitUntilHeld(1)          // the call reached the gate
/// // ... act while it is held ...
/// gate.open()
/// ```
///
/// Nothing sleeps: a held call is a parked continuation, and ``waitUntilHeld(_:fileID:line:)``
/// is woken by each arrival (bounded by a ``ChangeSignal`` watchdog).
public final class Gate: Sendable {
  private struct State {
    var closed: Bool
    /// Calls let through before the gate holds any (``close(lettingThrough:)``).
    var passing = 0
    var held = 0
    var parked: [CheckedContinuation<Void, Never>] = []
  }

  private let state: LockedState<State>
  private let arrivals = ChangeSignal()

  /// Creates a gate.
  ///
  /// - Parameter closed: Whether it holds the calls that pass through it from the start.
  public init(closed: Bool = false) { state = LockedState(State(closed: closed)) }

  /// Closes the gate: the calls that pass through it from now on are held.
  ///
  /// - Parameter passing: How many of the next calls still pass before it holds any.
  public func close(lettingThrough passing: Int = 0) {
    state.withLock {
      $0.closed = true
      $0.passing = passing
    }
  }

  /// Opens the gate: every held call goes on, and later ones pass.
  public func open() {
    let parked = state.withLock { state in
      state.closed = false
      defer { state.parked = [] }
      return state.parked
    }
    for continuation in parked { continuation.resume() }
  }

  /// How many calls the gate has held so far (released ones included).
  public var held: Int { state.withLock { $0.held } }

  /// Waits here while the gate is closed.
  public func pass() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
      let parked = state.withLock { state in
        guard state.closed else { return false }
        guard state.passing == 0 else {
          state.passing -= 1
          return false
        }
        state.held += 1
        state.parked.append(continuation)
        return true
      }
      if parked { arrivals.changed() } else { continuation.resume() }
    }
  }

  /// Waits until the gate has held `count` calls in all.
  ///
  /// - Parameters:
  ///   - count: How many calls it must have held, released ones included.
  ///   - fileID: The caller's file, for the error message.
  ///   - line: The caller's line, for the error message.
  /// - Throws: ``ChangeSignal/WaitError`` when that does not happen within the watchdog.
  public func waitUntilHeld(
    _ count: Int = 1, fileID: String = #fileID, line: Int = #line
  ) async throws {
    try await arrivals.waitUntil(fileID: fileID, line: line) { [self] in held >= count }
  }
}
