import AuthCoordinator
import Foundation

/// The ledger's sign-out bookkeeping: the logouts callers asked for, the lease's announcements,
/// the late saves whose undo is pending, and whether a token served belongs to a session a logout
/// ended (the signed-out-session check). Everything here runs under the ledger's lock.
extension FleetLedger {
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
    /// Its revocation of the account's grants threw: grants taken before it stay current, so
    /// another process may store, and serve, a result of one after its removal. It binds its
    /// own process only, which serves nothing it reads for the account from then on (rule 19).
    var revocationFailed = false
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

  /// Whether `process` revoking `account`'s grants now is a logout's revocation (a logout of
  /// it by the process not yet announced), not an undo's.
  func isLogoutRevocation(_ account: String, by process: Int) -> Bool {
    lock.withLock {
      pendingUndo[account]?[process] != true
        && unannouncedLogout(of: account, by: process, revoking: true) != nil
    }
  }

  /// The revocation of `process`'s logout of `account` threw (``Logout/revocationFailed``).
  func logoutRevocationFailed(_ account: String, by process: Int) {
    lock.withLock {
      if let index = unannouncedLogout(of: account, by: process, revoking: true) {
        logouts[index].revocationFailed = true
      }
    }
  }

  /// The first of `process`'s logouts of `account` it has not announced (and will: its process
  /// did not crash since), and with `revoking`, whose revocation has not failed: the one its
  /// next revocation or announcement belongs to. Under `lock`.
  private func unannouncedLogout(
    of account: String, by process: Int, revoking: Bool = false
  ) -> Int? {
    logouts.firstIndex {
      $0.account == account && $0.process == process && $0.announcedAt == nil && !$0.died
        && !(revoking && $0.revocationFailed)
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
      } else if let index = unannouncedLogout(of: account, by: process) {
        logouts[index].announcedAt = at
        logouts[index].announceMark = leaseSequence
      }
      if pendingUndo[account]?.isEmpty == true { pendingUndo[account] = nil }
    }
  }

  /// The lease granted `key`, with `fence`, to a process that asked at the mark `asked` and
  /// had the answer by the mark `answered`.
  func granted(_ key: AccountKey, asked: Int, answered: Int, fence: UInt64) {
    lock.withLock {
      grantMarks[key.account, default: []].append(asked)
      grantAnswered[fence] = answered
    }
  }

  /// The lease answered `current` about `grant`, asked at the mark `asked`. A grant taken
  /// before a revocation or sign-out of its account (or of everyone) that ended before the
  /// question never reads as current: a lease may drop history, but a grant older than a
  /// dropped sign-out reads as not current, never as current (`SignOutGenerations`). Checked
  /// here, at the lease, because the store's revoked fences keep most of what such a lie would
  /// let in out of the store. "Before" only when the acquire had its answer before the
  /// sign-out began (a call into the lease may hop executors after its first mark; seeds
  /// 0xfc09 and 0x1872d were blamed when the acquire's first mark was used).
  func leaseAnswered(_ grant: LeaseGrant, current: Bool, asked: Int) {
    guard current else { return }
    let forgotten = lock.withLock { () -> (began: Int, ended: Int, at: Duration, process: Int)? in
      guard let taken = grantAnswered[grant.fence] else { return nil }
      let records = (signedOut[grant.key.account] ?? []) + (signedOut[""] ?? [])
      return records.first { $0.began > taken && $0.ended < asked }
    }
    guard let forgotten else { return }
    violation(
      "sign-out forgotten",
      "the lease answered that \(grant.key.account)'s grant (fence \(grant.fence)) is current,"
        + " though it was taken before p\(forgotten.process)'s sign-out at \(forgotten.at)")
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
    let unrevoked = lock.withLock {
      logouts.contains {
        $0.account == key.account && $0.revocationFailed && $0.process != process
      }
    }
    if unrevoked {
      count("phase: save landed after another process's logout whose revocation failed")
    }
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
    /// After a logout whose revocation failed, by another process than the one that logged out
    /// (or by that one after a crash): what rule 19 allows then, counted apart.
    case afterAFailedRevocation
  }

  /// A call for `key` that started at `started` was served `access`: a token of a family born
  /// before a logout of the account that had ended (returned, and announced) before the call
  /// started is a signed-out session served again, unless a late save's undo is pending.
  ///
  /// A logout whose revocation failed binds its own process only (`process`, the call's), from
  /// its return until the process crashes: that process serves nothing it reads for the
  /// account.
  func signedOutSession(
    _ key: AccountKey, access: String, started: Duration, process: Int
  ) -> SignedOutServing? {
    lock.withLock {
      guard let birth = births[access] else { return nil }
      // The process keeps that record in memory: a crash since the logout began ended it.
      if let logout = logouts.first(where: { logout in
        guard logout.revocationFailed, logout.process == process, logout.account == key.account,
          birth < logout.started, let returned = logout.returned,
          crashes[process]?.contains(where: { $0 >= logout.started }) != true
        else { return false }
        return returned < started
      }) {
        return .afterLogout(logout)
      }
      let logout = logouts.first { logout in
        guard logout.account == key.account, let returned = logout.returned,
          birth < logout.started, !logout.revocationFailed,
          // Its own announcement, which follows its removal: another process's (an earlier
          // logout's, paused, or an undo's) says nothing of this one. A logout whose store
          // work hung, or whose process crashed, before it announced has not ended for the
          // others (it returned at the store timeout, its removal pending).
          let announce = logout.announcedAt
        else { return false }
        // Another process hears of it up to the seed's notice delay after the announcement.
        return max(returned, announce + noticeDelayBound) < started
      }
      guard let logout else {
        let unrevoked = logouts.contains { logout in
          guard logout.revocationFailed, logout.account == key.account, birth < logout.started,
            let returned = logout.returned
          else { return false }
          return returned < started
        }
        return unrevoked ? .afterAFailedRevocation : nil
      }
      if pendingUndo[key.account] != nil { return .inTheUndoWindow }
      // An undo's announcement, like the logout's, reaches another process up to the notice
      // delay late; until then that process serves what it read or refreshed while the undo
      // was pending (a call that started before it heard).
      let heardLate = undoAnnounced[key.account]?.contains { announce in
        announce >= logout.started && started < announce + noticeDelayBound
      }
      if heardLate == true { return .inTheUndoWindow }
      // Until a later logout ended for the others: as above, once it returned and its own
      // announcement could have been heard (seed 0x4355e: a later logout returned at its store
      // deadline, its removal and announcement still to come).
      let orphaned = undoDiedInACrash[key.account]?.contains { crash in
        crash >= logout.started
          && !logouts.contains { next in
            guard next.account == key.account, next.started > crash,
              let returned = next.returned, let announce = next.announcedAt
            else { return false }
            return max(returned, announce + noticeDelayBound) < started
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
