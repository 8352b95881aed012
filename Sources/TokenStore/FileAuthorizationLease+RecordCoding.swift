import Foundation

// The lease record's wire format (format version 1; the layout is described on
// ``LeaseRecord``): encoding, and decoding that refuses an inconsistent record and clamps a
// back-off no replica could have written.
extension LeaseRecord {
  func encoded() throws(TokenStoreError) -> Data {
    let wire = Wire(
      format: Self.format, version: Self.version, nextFence: nextFence, generation: generation,
      floor: floor, historyFloor: historyFloor == 0 ? nil : historyFloor,
      userSignedOut: userSignedOut.sorted { $0.key < $1.key }.map { account, mark in
        WireSignOut(
          mcUid: account, generation: mark.generation, by: mark.by,
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
      guard let account = mark.mcUid, record.userSignedOut[account] == nil else {
        consistent = false
        continue
      }
      consistent = consistent && mark.generation <= wire.generation
      let at = try stamp(wall: mark.at, boot: mark.boot, bootAt: mark.bootAt, at: time)
      clamped = clamped || at.clamped
      record.userSignedOut[account] = SignOut(generation: mark.generation, by: mark.by, at: at.time)
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
    /// The account, under the wire name files already hold.
    var mcUid: String
    var generation: UInt64
    /// When, as ``WireSignOut`` has it.
    var at: Double?
    var boot: String?
    var bootAt: UInt64?
  }

  private struct WireSignOut: Codable {
    /// The account (`nil` in everyone's sign-out), under the wire name files already hold.
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
