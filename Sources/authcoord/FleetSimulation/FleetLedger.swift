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

  /// Guards every stored property. The ones that are not private are the sign-out bookkeeping
  /// (FleetLedger+SignOuts.swift), which runs under it too.
  let lock = NSLock()
  let now: @Sendable () -> Duration
  private let worldDate: @Sendable () -> Date
  private(set) var trace: [String] = []
  private var spends: [String: Send] = [:]
  private var successor: [String: String] = [:]
  /// Refresh tokens issued in replies that reached their client garbled.
  private var garbled: Set<String> = []
  /// When each process index crashed (a restarted process keeps its index).
  var crashes: [Int: [Duration]] = [:]
  private(set) var reuses: [Reuse] = []
  private var stored: [String: Duration] = [:]
  private var holders: [AccountKey: Holding] = [:]
  private(set) var violations: [String] = []
  private(set) var coverage: [String: Int] = [:]
  private let keepsTrace: Bool
  private var hash: UInt64 = 0xCBF2_9CE4_8422_2325
  /// Orders what the lease was told: sign-outs and back-offs, each marked before the lease was
  /// asked and after it answered (the task may be suspended in between, and another lease
  /// operation run there).
  var leaseSequence = 0
  /// Each account's sign-outs and revocations at the lease (`""`: everyone's): the marks before
  /// and after, and when it ended.
  var signedOut: [String: [(began: Int, ended: Int, at: Duration, process: Int)]] = [:]
  /// The back-offs recorded, by key and the expiry the lease gives them.
  private var backOffs: [AccountKey: [Date: (sequence: Int, at: Duration)]] = [:]
  /// When each token's family was born: the client-credentials request it descends from left.
  var births: [String: Duration] = [:]
  /// The logouts the callers asked for, and each account's announced sign-outs.
  var logouts: [Logout] = []
  var announced: [String: [(at: Duration, process: Int)]] = [:]
  /// The longest a change notice takes to reach another process (``FleetLease/changes()``).
  var noticeDelayBound = Duration.zero
  var noticeBound: Duration {
    get { lock.withLock { noticeDelayBound } }
    set { lock.withLock { noticeDelayBound = newValue } }
  }
  /// Each account's announced sign-outs and grants, as lease marks.
  var announcedMarks: [String: [Int]] = [:]
  var grantMarks: [String: [Int]] = [:]
  /// The mark by which each grant (by fence) had been answered.
  var grantAnswered: [UInt64: Int] = [:]
  /// Per account, a save of a signed-out session's model that landed after the logout and
  /// whose undo (the saver's check of its grant after the save, then its announced removal)
  /// has not run yet.
  /// By account, then by the saving process: whether its check came back (`false`: not yet).
  var pendingUndo: [String: [Int: Bool]] = [:]
  /// Per account, when the undos of late saves were announced: a process that read the late
  /// save's model before the undo removed it hears of the undo up to the notice delay later.
  var undoAnnounced: [String: [Duration]] = [:]
  /// Per account, the processes whose save or grant check failed, until a save of theirs for
  /// it lands: a save retry, or a write in doubt, may be pending there.
  var retryingSaves: [String: Set<Int>] = [:]
  /// Per account, when a process crashed with a late save's undo pending.
  var undoDiedInACrash: [String: [Duration]] = [:]

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

  /// What a logout can be aimed at while it is in progress (``began(_:_:process:)``).
  enum Phase: String, CaseIterable {
    case storeRead = "a store read"
    case tokenRequest = "a token request"
    case leaseAcquisition = "a lease acquisition"
    case leaseRenewal = "a lease renewal"
    case save = "a save"
    /// A grant check (`isCurrent`): before and after a save, before serving after an
    /// announcement, and a save retry's.
    case grantCheck = "a grant check"
    /// A lease release, with or without a back-off.
    case leaseRelease = "a lease release"
    /// A logout's or an undo's removal, and the step after it until its announcement.
    case removal = "a removal"
  }

  /// Store reads, token requests, lease calls and saves in progress, by phase, account and
  /// process.
  private var inProgress: [Phase: [String: [Int: Int]]] = [:]

  /// `process` began `phase` for `account`.
  func began(_ phase: Phase, _ account: String, process: Int) {
    lock.withLock {
      inProgress[phase, default: [:]][account, default: [:]][process, default: 0] += 1
    }
  }

  /// `process` ended `phase` for `account`.
  func ended(_ phase: Phase, _ account: String, process: Int) {
    lock.withLock {
      let left = (inProgress[phase]?[account]?[process] ?? 1) - 1
      inProgress[phase]?[account]?[process] = left > 0 ? left : nil
      if inProgress[phase]?[account]?.isEmpty == true { inProgress[phase]?[account] = nil }
    }
  }

  /// The processes with `phase` in progress for `user`, lowest first.
  func processes(in phase: Phase, for user: AccountKey) -> [Int] {
    lock.withLock { inProgress[phase]?[user.account]?.keys.sorted() ?? [] }
  }

  /// Process `index` crashed now.
  func crashed(_ index: Int) {
    let at = now()
    let diedAfterReturning = lock.withLock { () -> Int in
      var diedAfterReturning = 0
      crashes[index, default: []].append(at)
      for phase in Phase.allCases {
        for account in inProgress[phase]?.keys.sorted() ?? [] {
          inProgress[phase]?[account]?[index] = nil
        }
      }
      for account in retryingSaves.keys { retryingSaves[account]?.remove(index) }
      retryingSaves = retryingSaves.filter { !$0.value.isEmpty }
      for logout in logouts.indices
      where logouts[logout].process == index && logouts[logout].announcedAt == nil {
        // It returned (at its store deadline, its removal still pending) and its removal or
        // announcement died with the process (0x42c5's case): the store may keep the
        // signed-out session, and the check no longer counts the logout as ended.
        if !logouts[logout].died && logouts[logout].returned != nil { diedAfterReturning += 1 }
        logouts[logout].died = true
      }
      // A late save whose saver crashed before its undo: the store keeps the signed-out
      // session until the account's next logout (an open gap, docs/reliability.md).
      for (account, savers) in pendingUndo where savers[index] != nil {
        undoDiedInACrash[account, default: []].append(at)
        pendingUndo[account]?[index] = nil
        if pendingUndo[account]?.isEmpty == true { pendingUndo[account] = nil }
      }
      return diedAfterReturning
    }
    if diedAfterReturning > 0 {
      count("logout returned, its removal or announcement died in a crash", diedAfterReturning)
    }
  }

  /// Whether the rotation of `token` went to a process that crashed after it sent the request:
  /// the new tokens died with it, before any save (a crash between the server's answer and the
  /// store, which no client survives).
  func rotationDiedInACrash(after token: String) -> Bool {
    lock.withLock {
      guard let next = successor[token], stored[next] == nil, let send = spends[token] else {
        return false
      }
      return crashes[send.process]?.contains { $0 >= send.at } ?? false
    }
  }

  /// The server issued `token` in a reply that reached its client garbled: no client learns it.
  func undelivered(_ token: String) { lock.withLock { _ = garbled.insert(token) } }

  /// Whether the rotation of `token` (its successor) reached no client: the server rotated and
  /// the reply was garbled on its way back. A store that keeps `token` then lost nothing any
  /// client could have kept; the next refresh presents it again (a reuse the server answers by
  /// revoking the family).
  func rotationUndelivered(after token: String) -> Bool {
    lock.withLock { successor[token].map { garbled.contains($0) } ?? false }
  }

  // MARK: - Logouts and back-offs

  /// The world's date now (the lease's clock).
  var date: Date { worldDate() }

  /// A mark in the order of lease operations (``leaseSequence``).
  func mark() -> Int {
    lock.withLock {
      leaseSequence += 1
      return leaseSequence
    }
  }

  /// The lease recorded a sign-out or revocation of `account` (`nil`: of everyone), asked for
  /// at the mark `began`.
  func leaseSignedOut(_ account: String?, began: Int, by process: Int) {
    let date = worldDate()
    let at = now()
    let during = lock.withLock { () -> Bool in
      leaseSequence += 1
      signedOut[account ?? "", default: []].append((began, leaseSequence, at, process))
      return backOffs.contains { key, records in
        (account == nil || key.account == account) && records.keys.contains { $0 > date }
      }
    }
    count("phase: sign-out at the lease")
    note("the lease signed \(account ?? "everyone") out")
    if during { count("phase: sign-out during a back-off") }
  }

  /// The lease recorded (or refused, the grant being no longer held) a back-off for `key` until
  /// `until`.
  func backOffRecorded(_ key: AccountKey, until: Date) {
    let at = now()
    lock.withLock {
      leaseSequence += 1
      backOffs[key, default: [:]][until] = (leaseSequence, at)
    }
    count("phase: back-off recorded")
    note(
      "\(key.account)'s back-off recorded until +\(String(format: "%.3f", until.timeIntervalSince(worldDate()))) s"
    )
  }

  /// Whether a back-off recorded for `key` may still be live (not ended, as far as the ledger
  /// knows, by a later sign-out): for aiming logouts at it.
  func isBackingOff(_ key: AccountKey) -> Bool { backOffEnd(key) != nil }

  /// When the live back-off recorded for `key` ends (one not ended by a later sign-out), if
  /// there is one: no token request of the fleet may leave for the key before then.
  func backOffEnd(_ key: AccountKey) -> Date? {
    let date = worldDate()
    return lock.withLock {
      let ended = ((signedOut[key.account] ?? []) + (signedOut[""] ?? [])).map(\.ended).max() ?? 0
      return backOffs[key]?.filter { $0.key > date && $0.value.sequence > ended }.keys.max()
    }
  }

  /// The lease told `process`, which asked at the mark `asked`, that `key` backs off until
  /// `until`: a back-off recorded before a sign-out of the account that ended before the
  /// question must not be (a sign-out ends the account's back-offs, so a sign-in after a
  /// logout is never refused by a failure of the session that ended).
  func backOffAnswered(_ key: AccountKey, until: Date, process: Int, asked: Int) {
    count("phase: acquire answered a back-off")
    note("p\(process) told \(key.account) backs off")
    let found = lock.withLock { () -> (sequence: Int, at: Duration)? in
      guard let record = backOffs[key]?[until] else { return nil }
      let between = ((signedOut[key.account] ?? []) + (signedOut[""] ?? [])).contains {
        $0.began > record.sequence && $0.ended < asked
      }
      return between ? record : nil
    }
    guard let found else { return }
    violation(
      "back-off outlived a logout",
      "p\(process), asking for \(key.account)'s lease after \(key.account) signed out, was "
        + "told to back off by the failure recorded at \(found.at)")
  }

  /// A token reply: `access` and `refresh` belong to the family `spent` belongs to, or, for a
  /// client-credentials grant (`spent` nil), to a new family born when the request left.
  func issued(access: String?, refresh: String?, spent: String?, sentAt: Duration) {
    lock.withLock {
      let birth = spent.flatMap { births[$0] } ?? sentAt
      if let access { births[access] = birth }
      if let refresh { births[refresh] = birth }
    }
  }
}
