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
  /// Refresh tokens issued in replies that reached their client garbled.
  private var garbled: Set<String> = []
  /// When each process index crashed (a restarted process keeps its index).
  private var crashes: [Int: [Duration]] = [:]
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
  private var leaseSequence = 0
  /// Each account's sign-outs and revocations at the lease (`""`: everyone's): the marks before
  /// and after, and when it ended.
  private var signedOut: [String: [(began: Int, ended: Int, at: Duration, process: Int)]] = [:]
  /// The back-offs recorded, by key and the expiry the lease gives them.
  private var backOffs: [AccountKey: [Date: (sequence: Int, at: Duration)]] = [:]
  /// When each token's family was born: the client-credentials request it descends from left.
  private var births: [String: Duration] = [:]
  /// The logouts the callers asked for, and each account's announced sign-outs.
  private var logouts: [Logout] = []
  private var announced: [String: [(at: Duration, process: Int)]] = [:]
  /// The longest a change notice takes to reach another process (``FleetLease/changes()``).
  private var noticeDelayBound = Duration.zero
  var noticeBound: Duration {
    get { lock.withLock { noticeDelayBound } }
    set { lock.withLock { noticeDelayBound = newValue } }
  }
  /// Each account's announced sign-outs and grants, as lease marks.
  private var announcedMarks: [String: [Int]] = [:]
  private var grantMarks: [String: [Int]] = [:]
  /// Per account, a save of a signed-out session's model that landed after the logout and
  /// whose undo (the saver's check of its grant after the save, then its announced removal)
  /// has not run yet.
  /// By account, then by the saving process: whether its check came back (`false`: not yet).
  private var pendingUndo: [String: [Int: Bool]] = [:]
  /// Per account, when the undos of late saves were announced: a process that read the late
  /// save's model before the undo removed it hears of the undo up to the notice delay later.
  private var undoAnnounced: [String: [Duration]] = [:]
  /// Per account, the processes whose save or grant check failed, until a save of theirs for
  /// it lands: a save retry, or a write in doubt, may be pending there.
  private var retryingSaves: [String: Set<Int>] = [:]
  /// Per account, when a process crashed with a late save's undo pending.
  private var undoDiedInACrash: [String: [Duration]] = [:]

  /// A logout a caller asked for: from its start until it returned and its sign-out was
  /// announced to the fleet.
  struct Logout {
    var account: String
    var started: Duration
    var returned: Duration?
    /// The process that logs out.
    var process: Int
    /// When its own announcement was made (after its removal), and its lease mark: the
    /// process's announcements that are not undos' go to its logouts in order.
    var announcedAt: Duration?
    var announceMark: Int?
    /// Its process crashed before it announced: it never will.
    var died = false
    /// The lease mark (``mark()``) when it began.
    var mark: Int
  }

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

  /// Process `index` crashed now.
  func crashed(_ index: Int) {
    let at = now()
    lock.withLock {
      crashes[index, default: []].append(at)
      for account in retryingSaves.keys { retryingSaves[account]?.remove(index) }
      retryingSaves = retryingSaves.filter { !$0.value.isEmpty }
      for logout in logouts.indices
      where logouts[logout].process == index && logouts[logout].announcedAt == nil {
        logouts[logout].died = true
      }
      // A late save whose saver crashed before its undo: the store keeps the signed-out
      // session until the account's next logout (an open gap, docs/reliability.md).
      for (account, savers) in pendingUndo where savers[index] != nil {
        undoDiedInACrash[account, default: []].append(at)
        pendingUndo[account]?[index] = nil
        if pendingUndo[account]?.isEmpty == true { pendingUndo[account] = nil }
      }
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

  /// A caller asked to log `account` out; returns the logout's index for ``logoutReturned(_:)``.
  func logoutStarted(_ account: String, by process: Int) -> Int {
    let at = now()
    return lock.withLock {
      leaseSequence += 1
      logouts.append(
        Logout(account: account, started: at, process: process, mark: leaseSequence))
      return logouts.count - 1
    }
  }

  func logoutReturned(_ index: Int) {
    let at = now()
    lock.withLock { logouts[index].returned = at }
  }

  /// The lease announced `account`'s sign-out to the fleet, for `process`: a logout's
  /// announcement, or the end of that process's undo of a late save (which removed the model
  /// first). Another process's announcement (a logout stopped before it, announcing late)
  /// ends no undo.
  func signOutAnnounced(_ account: String, by process: Int) {
    let at = now()
    lock.withLock {
      announced[account, default: []].append((at, process))
      leaseSequence += 1
      announcedMarks[account, default: []].append(leaseSequence)
      if pendingUndo[account]?[process] == true {
        pendingUndo[account]?[process] = nil
        undoAnnounced[account, default: []].append(at)
      } else if let index = logouts.firstIndex(where: {
        $0.account == account && $0.process == process && $0.announcedAt == nil && !$0.died
      }) {
        logouts[index].announcedAt = at
        logouts[index].announceMark = leaseSequence
      }
      if pendingUndo[account]?.isEmpty == true { pendingUndo[account] = nil }
    }
  }

  /// The lease granted `key` to a process that asked at the mark `asked`.
  func granted(_ key: AccountKey, asked: Int) {
    lock.withLock { grantMarks[key.account, default: []].append(asked) }
  }

  /// `process`'s save of `access` for `key` landed: if the token's family was born before a
  /// logout of the account that had begun, the save resurrected a signed-out session until its
  /// saver checks its grant again and undoes it (rule: a sign-out that lands during a save is
  /// undone at once). A process paused between the save and that check leaves it in the store
  /// for the pause: the undo window.
  func saveLanded(_ key: AccountKey, access: String, process: Int) {
    let late = lock.withLock { () -> Bool in
      retryingSaves[key.account]?.remove(process)
      if retryingSaves[key.account]?.isEmpty == true { retryingSaves[key.account] = nil }
      guard let birth = births[access],
        logouts.contains(where: { $0.account == key.account && $0.started > birth })
      else { return false }
      pendingUndo[key.account, default: [:]][process] = false
      return true
    }
    guard late else { return }
    count("phase: save landed after a logout")
    note("p\(process)'s save of \(access) for \(key.account) landed after its logout")
  }

  /// `process` asked whether its grant of `key` is current, and was told `current`: after a
  /// late save (``saveLanded(_:access:process:)``), `false` starts the undo, `true` means none
  /// will come.
  func grantChecked(_ key: AccountKey, process: Int, current: Bool) {
    lock.withLock {
      guard pendingUndo[key.account]?[process] == false else { return }
      pendingUndo[key.account]?[process] = current ? nil : true
      if pendingUndo[key.account]?.isEmpty == true { pendingUndo[key.account] = nil }
    }
  }

  /// `process`'s save, or one of its grant checks, for `key` failed.
  func saveInDoubt(_ key: AccountKey, process: Int) {
    lock.withLock { _ = retryingSaves[key.account, default: []].insert(process) }
  }

  /// A process that may be retrying a save of `user`, or have a write of it in doubt.
  func saver(retrying user: AccountKey) -> Int? {
    lock.withLock { retryingSaves[user.account]?.min() }
  }

  /// Whether the session of `access` was born during a logout of `account` that was stopped
  /// between its revocation and its announcement while another process was granted the lease:
  /// the open race of docs/reliability.md. Such a session is signed out by the announcement
  /// (its grants taken before it are not current), so the rotation of a process that refreshed
  /// it under one of those grants is refused, and the store keeps the spent token.
  func bornDuringAStoppedLogout(_ account: String, access: String) -> Bool {
    lock.withLock {
      guard let birth = births[access] else { return false }
      let duringALogout = logouts.contains { logout in
        guard logout.account == account, birth >= logout.started,
          let revoked = signedOut[account]?.first(where: {
            $0.began > logout.mark && $0.process == logout.process
          })?.ended,
          let announce = logout.announceMark
        else { return false }
        return grantMarks[account]?.contains(where: { $0 > revoked && $0 < announce }) == true
      }
      // An undo of a late save revokes, removes and announces as a logout does, and has the
      // same window: a session born after its revocation and before its announcement, under
      // a grant taken in between, is signed out by the announcement (0x18f58).
      let duringAnUndo = (signedOut[account] ?? []).contains { revocation in
        guard revocation.at <= birth,
          let index = announcement(of: revocation, account),
          let announce = announced[account]?[index], birth < announce.at
        else { return false }
        let mark = announcedMarks[account]![index]
        return grantMarks[account]?.contains { $0 > revocation.ended && $0 < mark } == true
      }
      return duringALogout || duringAnUndo
    }
  }

  /// The index (in ``announced`` and ``announcedMarks``) of the announcement that follows a
  /// revocation: the next one by the same process. Called under the lock.
  private func announcement(
    of revocation: (began: Int, ended: Int, at: Duration, process: Int), _ account: String
  ) -> Int? {
    guard let marks = announcedMarks[account], let times = announced[account] else { return nil }
    return marks.indices.first {
      marks[$0] > revocation.began && times[$0].process == revocation.process
    }
  }

  /// What serving a token of a signed-out session was.
  enum SignedOutServing {
    /// A violation: served after this logout had ended.
    case afterLogout(Logout)
    /// While a late save's undo was pending (``saveLanded(_:access:process:)``).
    case inTheUndoWindow
    /// After a late save whose saver crashed before its undo, and before the account's next
    /// logout emptied the store again: an open gap of the library (docs/reliability.md),
    /// counted apart.
    case afterAnUndoDiedInACrash
    /// The logout was stopped between its revocation and its announcement, and a process was
    /// granted the account's lease meanwhile: it read the signed-out session from the store
    /// (not yet emptied), refreshed it under a current grant and stored it after the removal.
    /// An open race of the library (docs/reliability.md), counted apart.
    case resumedDuringTheLogout
  }

  /// A call for `key` that started at `started` was served `access`: a token of a family born
  /// before a logout of the account that had ended (returned, and announced) before the call
  /// started is a signed-out session served again, unless a late save's undo is pending.
  func signedOutSession(
    _ key: AccountKey, access: String, started: Duration
  ) -> SignedOutServing? {
    lock.withLock {
      guard let birth = births[access] else { return nil }
      let logout = logouts.first { logout in
        guard logout.account == key.account, let returned = logout.returned,
          birth < logout.started,
          // Its own announcement, which follows its removal: another process's (an earlier
          // logout's, paused, or an undo's) says nothing of this one. A logout whose store
          // work hung, or whose process crashed, before it announced has not ended for the
          // others (it returned at the store timeout, its removal pending).
          let announce = logout.announcedAt
        else { return false }
        // Another process hears of it up to the seed's notice delay after the announcement.
        return max(returned, announce + noticeDelayBound) < started
      }
      guard let logout else { return nil }
      if pendingUndo[key.account] != nil { return .inTheUndoWindow }
      // An undo's announcement, like the logout's, reaches another process up to the notice
      // delay late; until then that process serves what it read or refreshed while the undo
      // was pending (a call that started before it heard).
      let heardLate = undoAnnounced[key.account]?.contains { announce in
        announce >= logout.started && started < announce + noticeDelayBound
      }
      if heardLate == true { return .inTheUndoWindow }
      let orphaned = undoDiedInACrash[key.account]?.contains { crash in
        crash >= logout.started
          && !logouts.contains { next in
            next.account == key.account && next.started > crash
              && (next.returned.map { $0 + noticeDelayBound < started } ?? false)
          }
      }
      if orphaned == true { return .afterAnUndoDiedInACrash }
      let account = key.account
      // The logout's revocation, or a later one (an undo of a late save revokes, removes and
      // announces as a logout does, and has the same window), then its announcement, with a
      // grant in between.
      let resumed = (signedOut[account] ?? []).contains { revocation in
        guard revocation.began > logout.mark,
          let announce = announcement(of: revocation, account).map({ announcedMarks[account]![$0] })
        else { return false }
        return grantMarks[account]?.contains { $0 > revocation.ended && $0 < announce } == true
      }
      if resumed { return .resumedDuringTheLogout }
      return .afterLogout(logout)
    }
  }
}
