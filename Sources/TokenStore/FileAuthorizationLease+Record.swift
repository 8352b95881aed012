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
    let seconds = wallClock.timeIntervalSince1970
    let stamp = seconds > 0 && seconds < 1e12 ? UInt64(seconds * 1e6) : 0
    var record = LeaseRecord()
    record.nextFence = max(stamp, known?.nextFence ?? 1, 1)
    record.generation = max(stamp, (known?.generation ?? 0) + 1)
    record.floor = record.generation
    return record
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
      && (userSignedOut[grant.key.mcUid]?.generation ?? 0) <= grant.generation
      && allRevoked <= grant.generation
      && (userRevoked[grant.key.mcUid]?.generation ?? 0) <= grant.generation
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
    for (mcUid, mark) in userSignedOut
    where old.userSignedOut[mcUid]?.generation != mark.generation
      || old.userSignedOut[mcUid]?.by != mark.by
    {
      signOuts.append((mark.generation, .signedOut(account: mcUid, by: mark.by)))
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

  // MARK: - Encoding

  func encoded() throws(TokenStoreError) -> Data {
    let wire = Wire(
      format: Self.format, version: Self.version, nextFence: nextFence, generation: generation,
      floor: floor, historyFloor: historyFloor == 0 ? nil : historyFloor,
      userSignedOut: userSignedOut.sorted { $0.key < $1.key }.map { mcUid, mark in
        WireSignOut(
          mcUid: mcUid, generation: mark.generation, by: mark.by,
          at: mark.at?.wall.timeIntervalSinceReferenceDate, boot: mark.at?.boot?.boot,
          bootAt: mark.at?.boot?.nanoseconds)
      },
      allSignedOut: allSignedOut.map {
        WireSignOut(mcUid: nil, generation: $0.generation, by: $0.by)
      },
      holders: holders.sorted { $0.key.description < $1.key.description }.map { key, holder in
        WireHolder(
          key: key, owner: holder.owner, fence: holder.fence,
          expiresAt: holder.expiresAt.timeIntervalSinceReferenceDate,
          boot: holder.bootExpiry?.boot, bootExpiresAt: holder.bootExpiry?.nanoseconds,
          backOffFailures: holder.backOff?.failures, backOffCode: holder.backOff?.code,
          generation: holder.generation)
      },
      userRevoked: userRevoked.isEmpty
        ? nil
        : userRevoked.sorted { $0.key < $1.key }.map {
          WireRevocation(
            mcUid: $0.key, generation: $0.value.generation,
            at: $0.value.at?.wall.timeIntervalSinceReferenceDate, boot: $0.value.at?.boot?.boot,
            bootAt: $0.value.at?.boot?.nanoseconds)
        },
      allRevoked: allRevoked == 0 ? nil : allRevoked)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    do {
      return try encoder.encode(wire) + Data("\n".utf8)
    } catch {
      throw TokenStoreError(.encodingFailed, "The lease record cannot be encoded.")
    }
  }

  /// Decodes a lease file: ``TokenStoreError/Code/unsupportedVersion`` for a newer version,
  /// ``TokenStoreError/Code/corruptFile`` for anything that is not a consistent record,
  /// including a holder whose expiry is not plausible at `time` (``isPlausible(_:at:)``), or
  /// with only one of `boot` and `bootExpiresAt`.
  static func decode(
    _ data: Data, at time: HostTime = HostClock.system.now()
  ) throws(TokenStoreError) -> LeaseRecord {
    try decodeClamping(data, at: time).record
  }

  /// ``decode(_:at:)``, telling whether it clamped what the file holds (a back-off's failures
  /// to ``LeaseBackOff/maximumFailures``, its end to ``LeaseBackOff/maximumDuration`` from
  /// `time`): the lease then writes the clamped record back, so that a clamped back-off ends.
  static func decodeClamping(
    _ data: Data, at time: HostTime
  ) throws(TokenStoreError) -> (record: LeaseRecord, clamped: Bool) {
    var clamped = false
    let decoder = JSONDecoder()
    guard let header = try? decoder.decode(Header.self, from: data), header.format == format
    else {
      throw TokenStoreError(.corruptFile, "The lease file is not a lease record.")
    }
    guard header.version <= version else {
      throw TokenStoreError(
        .unsupportedVersion,
        "The lease file has format version \(header.version); this code reads up to \(version)."
      )
    }
    guard header.version >= 1, let wire = try? decoder.decode(Wire.self, from: data) else {
      throw TokenStoreError(.corruptFile, "The lease file's record cannot be decoded.")
    }
    var record = LeaseRecord(
      nextFence: wire.nextFence, generation: wire.generation, floor: wire.floor,
      historyFloor: wire.historyFloor ?? 0)
    var consistent =
      wire.floor <= wire.generation && record.historyFloor <= wire.generation
      && wire.nextFence >= 1
    for mark in wire.userSignedOut {
      guard let mcUid = mark.mcUid, record.userSignedOut[mcUid] == nil else {
        consistent = false
        continue
      }
      consistent = consistent && mark.generation <= wire.generation
      let at = try stamp(wall: mark.at, boot: mark.boot, bootAt: mark.bootAt, at: time)
      clamped = clamped || at.clamped
      record.userSignedOut[mcUid] = SignOut(generation: mark.generation, by: mark.by, at: at.time)
    }
    if let mark = wire.allSignedOut {
      consistent = consistent && mark.generation <= wire.generation
      record.allSignedOut = SignOut(generation: mark.generation, by: mark.by)
    }
    for revocation in wire.userRevoked ?? [] {
      consistent =
        consistent && record.userRevoked[revocation.mcUid] == nil
        && revocation.generation <= wire.generation
      let at = try stamp(
        wall: revocation.at, boot: revocation.boot, bootAt: revocation.bootAt, at: time)
      clamped = clamped || at.clamped
      record.userRevoked[revocation.mcUid] = Revocation(
        generation: revocation.generation, at: at.time)
    }
    record.allRevoked = wire.allRevoked ?? 0
    consistent = consistent && record.allRevoked <= wire.generation
    for holder in wire.holders {
      var bootExpiry: BootInstant?
      switch (holder.boot, holder.bootExpiresAt) {
      case (nil, nil): bootExpiry = nil
      case (let boot?, let nanoseconds?):
        bootExpiry = BootInstant(boot: boot, nanoseconds: nanoseconds)
      default:
        throw TokenStoreError(
          .corruptFile, "The lease file's record has a holder with half a boot-clock expiry.")
      }
      var backOff: BackOffMark?
      switch (holder.backOffFailures, holder.backOffCode) {
      case (nil, nil): backOff = nil
      case (let failures?, let code?) where BackOffMark(failures: failures, code: code).isPlausible:
        backOff = BackOffMark(failures: min(failures, LeaseBackOff.maximumFailures), code: code)
        clamped = clamped || failures > LeaseBackOff.maximumFailures
      default:
        throw TokenStoreError(
          .corruptFile,
          "The lease file's record has a back-off without its failures or code, or with an"
            + " implausible one.")
      }
      var decoded = Holder(
        owner: holder.owner, fence: holder.fence,
        expiresAt: Date(timeIntervalSinceReferenceDate: holder.expiresAt), bootExpiry: bootExpiry,
        backOff: backOff, generation: backOff == nil ? holder.generation : nil)
      guard isPlausible(decoded, at: time) else {
        throw TokenStoreError(
          .corruptFile,
          "The lease file's record has a holder whose expiry is not a date (non-finite, before"
            + " 1970, or more than ten years ahead).")
      }
      if backOff != nil {
        let read = decoded
        decoded.endBackOff(by: time, LeaseBackOff.maximumDuration.seconds)
        clamped = clamped || decoded != read
      }
      consistent =
        consistent && record.holders[holder.key] == nil && holder.fence < wire.nextFence
        && (holder.generation ?? 0) <= wire.generation
      record.holders[holder.key] = decoded
    }
    guard consistent else {
      throw TokenStoreError(
        .corruptFile, "The lease file's record is inconsistent (counters, duplicates).")
    }
    return (record, clamped)
  }

  /// A mark's time as read: `nil` when it has none (an earlier version wrote it). A time ahead
  /// of `time` is clamped to it (`clamped`), so that no mark is kept longer than one made now.
  private static func stamp(
    wall: Double?, boot: String?, bootAt: UInt64?, at time: HostTime
  ) throws(TokenStoreError) -> (time: HostTime?, clamped: Bool) {
    let corrupt = TokenStoreError(
      .corruptFile,
      "The lease file's record has a sign-out whose time is not a date, or half a boot-clock"
        + " time.")
    guard let wall else {
      guard boot == nil, bootAt == nil else { throw corrupt }
      return (nil, false)
    }
    guard wall.isFinite, abs(wall) <= wallExpiryLimit else { throw corrupt }
    var stamp = HostTime(wall: Date(timeIntervalSinceReferenceDate: wall), boot: nil)
    switch (boot, bootAt) {
    case (nil, nil): break
    case (let boot?, let nanoseconds?) where !boot.isEmpty && boot.utf8.count <= maximumBootLength:
      stamp.boot = BootInstant(boot: boot, nanoseconds: nanoseconds)
    default: throw corrupt
    }
    var clamped = false
    if stamp.wall > time.wall {
      stamp.wall = time.wall
      clamped = true
    }
    if let instant = stamp.boot, let now = time.boot, instant.boot == now.boot,
      instant.nanoseconds > now.nanoseconds
    {
      stamp.boot = now
      clamped = true
    }
    return (stamp, clamped)
  }

  private struct Header: Decodable {
    var format: String
    var version: Int
  }

  private struct Wire: Codable {
    var format: String
    var version: Int
    var nextFence: UInt64
    var generation: UInt64
    var floor: UInt64
    /// Absent when 0 (files of earlier versions read as before).
    var historyFloor: UInt64?
    var userSignedOut: [WireSignOut]
    var allSignedOut: WireSignOut?
    var holders: [WireHolder]
    /// Absent when empty (files without revocations read as before).
    var userRevoked: [WireRevocation]?
    var allRevoked: UInt64?
  }

  private struct WireRevocation: Codable {
    var mcUid: String
    var generation: UInt64
    /// When, as ``WireSignOut`` has it.
    var at: Double?
    var boot: String?
    var bootAt: UInt64?
  }

  private struct WireSignOut: Codable {
    var mcUid: String?
    var generation: UInt64
    var by: String
    /// When: seconds since 2001-01-01 on the writer's wall clock, and nanoseconds since `boot`
    /// on the boot clock. Absent in files of earlier versions, and in everyone's sign-out.
    var at: Double?
    var boot: String?
    var bootAt: UInt64?
  }

  private struct WireHolder: Codable {
    var key: AccountKey
    var owner: String
    var fence: UInt64
    /// Seconds since 2001-01-01T00:00:00Z, so a `Date` round-trips bit for bit.
    var expiresAt: Double
    /// The boot of ``bootExpiresAt``; absent in files of earlier versions (and from writers
    /// without a boot clock), as is ``bootExpiresAt``.
    var boot: String?
    /// Nanoseconds since that boot on the host's boot clock.
    var bootExpiresAt: UInt64?
    /// A back-off's (``BackOffMark``), both or neither; absent for a grant. Earlier versions
    /// ignore them and see a holder no one owns, which they wait for until it expires.
    var backOffFailures: Int?
    var backOffCode: String?
    /// The grant's sign-out generation; absent for a back-off and in files of earlier versions.
    var generation: UInt64?
  }
}
