import AuthCoordinator
import Foundation

/// What one seed of the fleet simulation saw: the trace, every refresh-token spend and reuse,
/// the grants each process held, the saves that landed, the calls, and the violations of the
/// invariants. Every part of the world writes to it; all of them run on the world's one driver
/// thread, and the lock only keeps the type honest about it.
final class FleetLedger: @unchecked Sendable {
  /// A refresh-token request as it left a process.
  struct Send {
    var caller: String
    var process: Int
    var at: Duration
    /// Whether the process held a live grant for the key when the authorizer handed the
    /// request to the transport, and when the request left (a pause may come between).
    var liveAtEntry: Bool
    var liveAtLeft: Bool
  }

  struct Reuse {
    var token: String
    var first: Send
    var second: Send
  }

  struct Holding {
    var process: Int
    var fence: UInt64
    var expiresAt: Date
  }

  private let lock = NSLock()
  private let now: @Sendable () -> Duration
  private let worldDate: @Sendable () -> Date
  private(set) var trace: [String] = []
  private var spends: [String: Send] = [:]
  private var successor: [String: String] = [:]
  private(set) var reuses: [Reuse] = []
  private var stored: [String: Duration] = [:]
  private var holders: [AccountKey: Holding] = [:]
  private(set) var violations: [String] = []
  private(set) var coverage: [String: Int] = [:]
  private let keepsTrace: Bool
  private var hash: UInt64 = 0xCBF2_9CE4_8422_2325

  init(
    now: @escaping @Sendable () -> Duration, date: @escaping @Sendable () -> Date, keepsTrace: Bool
  ) {
    self.now = now
    worldDate = date
    self.keepsTrace = keepsTrace
  }

  /// FNV-1a of every trace line: the same seed must give the same value on every run.
  var traceHash: UInt64 { lock.withLock { hash } }

  func note(_ line: String) {
    let stamped = String(format: "%9.3f ", now().seconds) + line
    lock.withLock {
      for byte in stamped.utf8 {
        hash = (hash ^ UInt64(byte)) &* 0x0100_0000_01B3
      }
      hash = (hash ^ 0x0A) &* 0x0100_0000_01B3
      if keepsTrace { trace.append(stamped) }
    }
  }

  func count(_ what: String, _ by: Int = 1) { lock.withLock { coverage[what, default: 0] += by } }

  func violation(_ kind: String, _ message: String) {
    count("violation: \(kind)")
    note("VIOLATION \(kind): \(message)")
    lock.withLock { if violations.count < 20 { violations.append("[\(kind)] \(message)") } }
  }

  var violationCount: Int {
    lock.withLock { coverage.filter { $0.key.hasPrefix("violation: ") }.values.reduce(0, +) }
  }

  // MARK: - The lease, as the processes saw it

  func held(_ key: AccountKey, process: Int, fence: UInt64, expiresAt: Date) {
    lock.withLock {
      if let holder = holders[key], holder.fence > fence { return }
      holders[key] = Holding(process: process, fence: fence, expiresAt: expiresAt)
    }
  }

  func released(_ key: AccountKey, fence: UInt64) {
    lock.withLock { if holders[key]?.fence == fence { holders[key] = nil } }
  }

  /// The process the ledger last heard take `key`'s lease, if it still holds it.
  func holder(of key: AccountKey) -> Int? { lock.withLock { holders[key]?.process } }

  func holdsLiveLease(_ key: AccountKey, process: Int) -> Bool {
    let date = worldDate()
    return lock.withLock {
      holders[key].map { $0.process == process && $0.expiresAt > date } ?? false
    }
  }

  // MARK: - Refresh tokens

  /// `token` was spent by `send` (the server granted the refresh and issued `next`).
  func spent(_ token: String, by send: Send, next: String?) {
    lock.withLock {
      spends[token] = send
      if let next { successor[token] = next }
    }
  }

  /// `token`, spent before, was presented again by `send`.
  func reused(_ token: String, by send: Send) {
    lock.withLock {
      guard let first = spends[token] else { return }
      reuses.append(Reuse(token: token, first: first, second: send))
    }
  }

  /// A save of a model carrying `refreshToken` landed, made by `process` for `key`. Only a save
  /// made under a live grant counts for ``rotationStored(after:)``: a deposed holder's fenced
  /// save may land (no later holder saved yet) after its successor read the store, which then
  /// spends the token the deposed holder had spent: the contract's stated window, not a stale
  /// read.
  func stored(refreshToken: String?, key: AccountKey, process: Int) {
    guard let refreshToken else { return }
    let at = now()
    let live = holdsLiveLease(key, process: process)
    lock.withLock {
      if live, stored[refreshToken] == nil { stored[refreshToken] = at }
    }
    if !live { count("save landed after its grant lapsed") }
  }

  /// When the first of the tokens issued after `token` (its rotation, that one's, ...) was
  /// stored under a live grant, if ever.
  func rotationStored(after token: String) -> Duration? {
    lock.withLock {
      var next = successor[token]
      var first: Duration?
      var steps = 0
      while let current = next, steps < 10_000 {
        if let at = stored[current] { first = min(first ?? at, at) }
        next = successor[current]
        steps += 1
      }
      return first
    }
  }

  /// Whether `token` is the last of its chain: no refresh of it was ever granted.
  func isNewest(_ token: String) -> Bool { lock.withLock { successor[token] == nil } }
}
