import Foundation

/// What the lease file holds (format version 1), decoded; pure values, no I/O.
///
/// On disk it is one JSON object (keys sorted):
/// `{"allSignedOut":{"by":"…","generation":3},"floor":0,"format":"authcoordinator.lease",`
/// `"generation":3,"holders":[{"boot":"…","bootExpiresAt":…,"expiresAt":…,"fence":7,`
/// `"key":{…},"owner":"…"}],"nextFence":8,`
/// `"userSignedOut":[{"by":"…","generation":2,"mcUid":"u1"}],"version":1}`.
///
/// A holder's expiry is kept twice: `boot` and `bootExpiresAt` (nanoseconds on the host's boot
/// clock, ``BootInstant``), which is what readers compare, and `expiresAt` (wall clock), for
/// readers without a boot clock and for the versions before it, which ignore the two newer
/// fields. A holder without them (written by such a version) is compared on the wall clock, as
/// before. A holder of another boot has expired: every process of that boot is gone.
///
/// A grant's holder records its sign-out `generation`, and each account's sign-out and
/// revocation when it happened (`at` on the wall clock, `boot` and `bootAt` on the boot clock),
/// so that the history is kept only while a grant can need it (FileAuthorizationLease+History.swift);
/// `historyFloor` is the generation below which it was dropped. Versions before them ignore
/// these fields; a holder or a mark without them (written by such a version) is read as before.
struct LeaseRecord: Equatable, Sendable {
  static let format = "authcoordinator.lease"
  static let version = 1
  /// The largest lease file written: a change that would make it larger is refused
  /// (``TokenStoreError/Code/fileTooLarge``) once the history no grant needs is dropped. A
  /// lease file is a few hundred bytes per key.
  static let maximumSize = 1 << 20
  /// The largest lease file read: twice ``maximumSize``, so that a file an earlier version let
  /// grow a little past it is still read (and its history dropped), never replaced by an empty
  /// record.
  static let maximumReadSize = 2 * maximumSize
  /// How far past the reader's wall clock a holder's expiry may lie: ten years. A later expiry
  /// (1e300 seconds, say) is no grant any process took; the record is corrupt, since waiting
  /// for such a holder would be waiting forever.
  static let expiryHorizon: TimeInterval = 10 * 365.25 * 86_400
  /// The longest time to live a grant is given (longer requests, up to `.seconds(Int64.max)`,
  /// are shortened to it): one year, well inside ``expiryHorizon`` even for a reader whose
  /// clock lags the writer's.
  static let maximumTimeToLive: TimeInterval = 365.25 * 86_400
  /// The longest boot identity recorded (Linux and Apple systems use 36-character UUIDs).
  static let maximumBootLength = 128
  /// The wall-clock expiry of a holder compared on the boot clock is not compared at all, but
  /// must still be a date `Date` arithmetic handles: within about 3,000 years of 2001.
  static let wallExpiryLimit: TimeInterval = 1e11

  /// Whether a holder may expire at `expiresAt` (seconds since 2001-01-01) in a record read at
  /// `now`: a finite date, not before 1970, at most ``expiryHorizon`` after `now`.
  static func isPlausibleExpiry(_ expiresAt: Double, now: Date) -> Bool {
    expiresAt.isFinite
      && expiresAt >= -Date.timeIntervalBetween1970AndReferenceDate
      && expiresAt <= now.timeIntervalSinceReferenceDate + expiryHorizon
  }

  /// Whether a holder read at `time` is one some process could have written: its boot-clock
  /// expiry, when it is of the reader's boot, at most ``expiryHorizon`` ahead (one of another
  /// boot has lapsed, whatever its value); its wall-clock expiry plausible
  /// (``isPlausibleExpiry(_:now:)``) when that is what the reader compares, and a date within
  /// ``wallExpiryLimit`` of 2001 in any case.
  static func isPlausible(_ holder: Holder, at time: HostTime) -> Bool {
    let wall = holder.expiresAt.timeIntervalSinceReferenceDate
    guard wall.isFinite, abs(wall) <= wallExpiryLimit else { return false }
    if let boot = holder.bootExpiry?.boot, boot.isEmpty || boot.utf8.count > maximumBootLength {
      return false
    }
    guard let expiry = holder.bootExpiry, let now = time.boot else {
      return isPlausibleExpiry(wall, now: time.wall)
    }
    guard expiry.boot == now.boot else { return true }
    return expiry.nanoseconds <= now.advanced(bySeconds: expiryHorizon).nanoseconds
  }

  struct Holder: Equatable, Sendable {
    var owner: String
    var fence: UInt64
    /// The expiry on the writer's wall clock: compared only when the holder has no boot-clock
    /// expiry (an older writer's) or the reader has no boot clock.
    var expiresAt: Date
    /// The expiry on the host's boot clock, with the boot's identity.
    var bootExpiry: BootInstant? = nil
    /// Set for the back-off a released grant left (``FileAuthorizationLease/release(_:backingOff:)``):
    /// no one owns it, and until it expires every acquire is told to back off.
    var backOff: BackOffMark? = nil
    /// The sign-out generation of the grant (``LeaseGrant/generation``): the sign-outs since
    /// are kept while the holder may ask. `nil` for a back-off, and for a holder an earlier
    /// version wrote (its generation is unknown: every sign-out is kept while it may ask).
    var generation: UInt64? = nil

    /// A holder whose grant lasts `seconds` from `time`, on both clocks.
    static func lasting(
      _ seconds: TimeInterval, owner: String, fence: UInt64, generation: UInt64? = nil,
      from time: HostTime
    ) -> Holder {
      Holder(
        owner: owner, fence: fence, expiresAt: time.wall.addingTimeInterval(seconds),
        bootExpiry: time.boot?.advanced(bySeconds: seconds), generation: generation)
    }

    /// Whether the grant has not lapsed at `time`. On the boot clock when both the holder and
    /// the reader have one: a holder of another boot has lapsed. Else on the wall clock.
    func isLive(at time: HostTime) -> Bool {
      guard let expiry = bootExpiry, let now = time.boot else { return expiresAt > time.wall }
      return expiry.boot == now.boot && expiry.nanoseconds > now.nanoseconds
    }

    /// Makes the holder expire at most `seconds` after `time`, on both clocks: a back-off read
    /// from the file lasts no longer than one written now could.
    mutating func endBackOff(by time: HostTime, _ seconds: TimeInterval) {
      expiresAt = min(expiresAt, time.wall.addingTimeInterval(seconds))
      if let expiry = bootExpiry, let now = time.boot, expiry.boot == now.boot {
        bootExpiry = BootInstant(
          boot: expiry.boot,
          nanoseconds: min(expiry.nanoseconds, now.advanced(bySeconds: seconds).nanoseconds))
      }
    }

    /// When the grant lapses, as a date on the reader's wall clock: the time left on the boot
    /// clock counted from the reader's wall clock, so that a reader whose wall clock stepped
    /// still waits for as long as the grant has left.
    func expiry(at time: HostTime) -> Date {
      guard let expiry = bootExpiry, let now = time.boot else { return expiresAt }
      guard expiry.boot == now.boot else { return min(expiresAt, time.wall) }
      return time.wall.addingTimeInterval(now.seconds(to: expiry))
    }
  }

  /// What a back-off tells the next owner to ask (``LeaseBackOff``, without its duration: the
  /// holder's expiry is the back-off's end).
  struct BackOffMark: Equatable, Sendable {
    var failures: Int
    var code: String

    /// The longest error code recorded.
    static let maximumCodeLength = 64

    var isPlausible: Bool {
      failures >= 0 && !code.isEmpty && code.utf8.count <= Self.maximumCodeLength
    }
  }

  struct SignOut: Equatable, Sendable {
    var generation: UInt64
    var by: String
    /// When it happened (`nil`: written by an earlier version, or everyone's sign-out, which
    /// is never dropped).
    var at: HostTime? = nil
  }

  /// A revocation of an account's grants (``FileAuthorizationLease/revokeGrants(ofAccount:)``).
  struct Revocation: Equatable, Sendable {
    var generation: UInt64
    /// When it happened (`nil`: written by an earlier version).
    var at: HostTime? = nil
  }

  /// The fence of the next grant.
  var nextFence: UInt64 = 1
  /// Bumped by every sign-out; a grant records the value at its time.
  var generation: UInt64 = 0
  /// Grants of a lower generation are not current: set when the file had to be recreated
  /// (missing or unreadable), because its sign-out history was lost.
  var floor: UInt64 = 0
  /// Grants of a lower generation are not current: the sign-outs and revocations below it were
  /// dropped, once no grant in the record was older than them
  /// (FileAuthorizationLease+History.swift).
  var historyFloor: UInt64 = 0
  var userSignedOut: [String: SignOut] = [:]
  var allSignedOut: SignOut?
  /// Grants revoked without an announcement (the first half of a logout).
  var userRevoked: [String: Revocation] = [:]
  var allRevoked: UInt64 = 0
  var holders: [AccountKey: Holder] = [:]

  /// A record to start from when there is no usable file. Its counters start at the wall
  /// clock in microseconds (and above `known`), so they exceed every fence and generation of a
  /// file that was lost, and every earlier grant is not current.
  static func fresh(after known: LeaseRecord?, wallClock: Date) -> LeaseRecord {
    let stamp = microseconds(at: wallClock)
    var record = LeaseRecord()
    record.nextFence = max(stamp, known?.nextFence ?? 1, 1)
    record.generation = max(stamp, (known?.generation ?? 0) + 1)
    record.floor = record.generation
    return record
  }

  /// The first fence of a lease numbered from `wallClock` (an in-memory lease, or a record made
  /// afresh): above every fence a lease made earlier issued, unless that one issued more than
  /// one grant per microsecond since, or the clock was stepped back between the two.
  static func firstFence(at wallClock: Date) -> UInt64 {
    max(microseconds(at: wallClock), 1)
  }

  /// `wallClock` in microseconds since 1970; 0 for a clock outside any plausible range.
  private static func microseconds(at wallClock: Date) -> UInt64 {
    let seconds = wallClock.timeIntervalSince1970
    return seconds > 0 && seconds < 1e12 ? UInt64(seconds * 1e6) : 0
  }

  /// Removes the back-offs of the keys `matches` selects: a signed-out account's next sign-in
  /// must not wait out its old back-off. Not announced: no one waits for a back-off.
  mutating func endBackOffs(of matches: (AccountKey) -> Bool) {
    holders = holders.filter { key, holder in holder.backOff == nil || !matches(key) }
  }

  /// Whether no sign-out (and no loss of the file) happened since `grant` was taken.
  func isCurrent(_ grant: LeaseGrant) -> Bool {
    floor <= grant.generation
      && historyFloor <= grant.generation
      && (allSignedOut?.generation ?? 0) <= grant.generation
      && (userSignedOut[grant.key.account]?.generation ?? 0) <= grant.generation
      && allRevoked <= grant.generation
      && (userRevoked[grant.key.account]?.generation ?? 0) <= grant.generation
  }

  /// What changed from `old` to `self`, as announcements. A grant gone (unless it expired
  /// before `time` and was taken over) is a release (a back-off gone is nothing: no one waits
  /// for one); a changed sign-out mark is a sign-out; a raised floor (the file was recreated)
  /// is ``LeaseChange/unknown`` only, and so is a history floor above every generation `old`
  /// knew (sign-outs made and dropped since: whose cannot be told).
  func changes(since old: LeaseRecord, at time: HostTime) -> [LeaseChange] {
    if floor != old.floor || generation < old.generation || nextFence < old.nextFence {
      return [.unknown]
    }
    var result: [LeaseChange] = []
    let released = old.holders.filter { key, holder in
      guard holder.backOff == nil else { return false }
      guard let current = holders[key] else { return true }
      return current.fence != holder.fence && holder.isLive(at: time)
    }
    for key in released.keys.sorted(by: { $0.description < $1.description }) {
      result.append(.released(key))
    }
    var signOuts: [(UInt64, LeaseChange)] = []
    // A mark whose time was only added (to one an earlier version wrote) is no sign-out.
    for (account, mark) in userSignedOut
    where old.userSignedOut[account]?.generation != mark.generation
      || old.userSignedOut[account]?.by != mark.by
    {
      signOuts.append((mark.generation, .signedOut(account: account, by: mark.by)))
    }
    if let mark = allSignedOut,
      mark.generation != old.allSignedOut?.generation || mark.by != old.allSignedOut?.by
    {
      signOuts.append((mark.generation, .signedOutAll(by: mark.by)))
    }
    result += signOuts.sorted { $0.0 < $1.0 }.map(\.1)
    if historyFloor != old.historyFloor && historyFloor > old.generation {
      result.append(.unknown)
    }
    return result
  }
}
