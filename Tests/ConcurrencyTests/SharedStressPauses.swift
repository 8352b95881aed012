import Foundation
import SyncPrimitives

/// The pauses of a shared-lease stress run: a simulated process stopped (as by `SIGSTOP`, a
/// laptop's lid, a VM's stall) for longer than its lease's time to live, at a random point.
///
/// A paused process does nothing through its seams until the pause ends: every lease, store and
/// token-server operation it begins waits at ``gate(_:)`` (the lease's renewals too, so its grant
/// lapses and another process can take the key over). Its coordinator's own timers still run:
/// only pauses shorter than the flight's deadline reach the step after the pause, so the driver
/// gives a paused run's processes deadlines longer than the longest pause.
///
/// Each kind is drawn, from the run's seed, where the process's seams see it (``Kind``); a kind
/// that has not fired after 20 of its points fires at the next one. A process that was paused is
/// not paused again for twice its time to live after the pause ended, so that no process spends
/// most of a run stopped.
final class SharedStressPauses: Sendable {
  /// Where a process stops.
  enum Kind: String, Sendable, CaseIterable {
    /// Just after the lease granted the key, before the re-read.
    case acquire
    /// During a read of the store while the process holds the key's lease (the re-read, or a
    /// retry's confirmation read), before or after the read itself.
    case reread
    /// During a renewal of the lease (the renewal task's, or a retry's confirmation), before or
    /// after the renewal itself.
    case renewal
    /// From the token server's 503 (with `Retry-After`) on: through the retry's back-off and
    /// into the confirmation before the next attempt.
    case backOff
    /// After the token request left and the server rotated the refresh token, before the
    /// response is back: the one pause the contract does not cover (the stated window).
    case afterRequest

    /// The chance, in percent, that a process stops at one of its seams' points of this kind.
    var percent: Double {
      switch self {
      case .acquire: 6
      case .reread: 6
      case .renewal: 5
      case .backOff: 60
      case .afterRequest: 10
      }
    }

    /// Whether the pause comes before the token request leaves.
    var isBeforeRequest: Bool { self != .afterRequest }
  }

  /// One pause that fired.
  struct Pause: Sendable {
    var process: Int
    var kind: Kind
    /// Whether it began after the seam's operation (a read or renewal already made).
    var afterOperation: Bool
    var began: ContinuousClock.Instant
    var length: Duration
    var timeToLive: Duration
  }

  /// What fired.
  struct Counts: Sendable {
    var fired: [Kind: Int] = [:]
    /// Back-off pauses during which the flight scheduled its retry (seen from the process's
    /// `retryScheduled` event while it was still paused).
    var backOffsRetried = 0
    var longest: Duration = .zero
    var total: Duration = .zero
    /// The shortest pause, in times its process's time to live.
    var shortestInTimeToLives = Double.infinity
  }

  private struct ProcessState {
    var pausedUntil: ContinuousClock.Instant
    var pausedAs: Kind?
    var timeToLive: Duration
  }

  private struct State {
    var rng: SplitMix64
    var processes: [ProcessState]
    /// The points of each kind seen so far, fired or not.
    var opportunities: [Kind: Int] = [:]
    var counts = Counts()
    var recent: [Pause] = []
  }

  /// The points of a kind after which it fires if it never did.
  private static let overdueAfter = 20

  /// How long pauses stay in ``recent`` for ``recentPauses(of:within:)``.
  private static let memory = Duration.seconds(10)

  /// The kinds drawn; none: no pause ever fires and ``gate(_:)`` returns at once.
  let kinds: Set<Kind>
  /// Whether pauses are drawn at all.
  var enabled: Bool { !kinds.isEmpty }
  private let state: LockedState<State>

  /// - Parameters:
  ///   - timeToLive: Each process's lease time to live.
  ///   - seed: The run's seed.
  ///   - kinds: The kinds drawn.
  init(timeToLive: [Duration], seed: UInt64, kinds: Set<Kind>) {
    self.kinds = kinds
    let start = ContinuousClock.now
    state = LockedState(
      State(
        rng: SplitMix64(seed: SplitMix64.hash(seed, 5)),
        processes: timeToLive.map {
          ProcessState(pausedUntil: start, pausedAs: nil, timeToLive: $0)
        }))
  }

  var counts: Counts { state.withLock { $0.counts } }

  /// Draws whether `process` stops here, as `kind`; when it does, the pause begins now, lasts
  /// 1.2 to 2 times the process's time to live, and is returned.
  ///
  /// - Parameters:
  ///   - afterOperation: Whether the seam's operation was already made.
  @discardableResult
  func draw(_ kind: Kind, process: Int, afterOperation: Bool = false) -> Pause? {
    guard kinds.contains(kind) else { return nil }
    let now = ContinuousClock.now
    return state.withLock { state in
      let current = state.processes[process]
      guard current.pausedUntil + current.timeToLive * 2 <= now else { return nil }
      state.opportunities[kind, default: 0] += 1
      // A kind that has not fired after 20 points fires at the next one, so that a short run
      // with few processes still pauses at every kind.
      let overdue =
        state.counts.fired[kind, default: 0] == 0
        && state.opportunities[kind, default: 0] > Self.overdueAfter
      guard overdue || state.rng.chance(kind.percent) else { return nil }
      let length = current.timeToLive * Double.random(in: 1.2...2, using: &state.rng)
      state.processes[process].pausedUntil = now + length
      state.processes[process].pausedAs = kind
      state.counts.fired[kind, default: 0] += 1
      state.counts.longest = max(state.counts.longest, length)
      state.counts.total += length
      state.counts.shortestInTimeToLives = min(
        state.counts.shortestInTimeToLives, length / current.timeToLive)
      let pause = Pause(
        process: process, kind: kind, afterOperation: afterOperation, began: now, length: length,
        timeToLive: current.timeToLive)
      state.recent.append(pause)
      state.recent.removeAll { $0.began + $0.length + Self.memory < now }
      return pause
    }
  }

  /// Whether the seams draw a position: before or after the operation.
  func drawAfterOperation() -> Bool { state.withLock { $0.rng.chance(50) } }

  /// Returns when `process` is not paused. It cannot be cancelled: a stopped process does not
  /// see its tasks' cancellation either.
  func gate(_ process: Int) async {
    guard enabled else { return }
    while true {
      let until = state.withLock { $0.processes[process].pausedUntil }
      guard until > .now else { return }
      await Task { try? await Task.sleep(until: until, clock: .continuous) }.value
    }
  }

  /// `process` scheduled a retry; counted when it happens while a back-off pause stops it.
  func retryScheduled(process: Int) {
    state.withLock { state in
      let current = state.processes[process]
      if current.pausedAs == .backOff, current.pausedUntil > .now {
        state.counts.backOffsRetried += 1
      }
    }
  }

  /// The last pauses of `process` that began at most `within` before now, for a violation's
  /// message.
  func recentPauses(of process: Int, within: Duration) -> [String] {
    let now = ContinuousClock.now
    return state.withLock { state in
      state.recent.filter { $0.process == process && $0.began.duration(to: now) <= within }
        .map {
          "\($0.kind.rawValue)\($0.afterOperation ? " (after the operation)" : "") for "
            + "\($0.length) (TTL \($0.timeToLive)), began \($0.began.duration(to: now)) ago"
        }
    }
  }
}
