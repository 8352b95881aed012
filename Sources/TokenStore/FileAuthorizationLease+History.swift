import Foundation

// The lease file's history, kept only while a grant can need it. A sign-out (or revocation) of
// an account is needed only while some grant of it taken before may still ask `isCurrent`:
// grants in the record record their generation, so a mark older than every grant the record
// still holds can go, and `historyFloor` rises to it, so that a grant older than the dropped
// history (one released, or taken over, long ago) reads as not current, never as current. A
// back-off goes once it ended; a grant that lapsed, once no holder could renew it any more.
extension LeaseRecord {
  /// How long the history is kept when the file is small: a sign-out or revocation, and a
  /// lapsed grant that was not taken over (its holder may still renew it), for one year, the
  /// longest time to live (``maximumTimeToLive``).
  static let historyRetention: TimeInterval = maximumTimeToLive
  /// How long the history is kept at least, once the file grew past ``compactionThreshold``:
  /// one hour. A process that did not look at the file for longer learns of the sign-outs
  /// dropped meanwhile as ``LeaseChange/unknown`` only.
  static let minimumHistoryRetention: TimeInterval = 3600
  /// The encoded size past which the history is dropped down to ``minimumHistoryRetention``:
  /// 32 KiB, so that every operation stays a read and a write of a small file.
  static let compactionThreshold = 32 * 1024

  /// Seconds from `stamp` to `time` on the clock the record compares expiries on: the boot
  /// clock when both have one (infinite for a stamp of another boot: every process of that boot
  /// is gone), else the wall clock. Negative when `stamp` is later.
  static func seconds(since stamp: HostTime, at time: HostTime) -> TimeInterval {
    guard let then = stamp.boot, let now = time.boot else {
      return time.wall.timeIntervalSince(stamp.wall)
    }
    return then.boot == now.boot ? then.seconds(to: now) : .infinity
  }

  /// Drops the history no grant can need any more: ended back-offs; grants that lapsed more
  /// than `retention` ago; and the sign-outs and revocations older than `retention` that are
  /// older than every grant the record still holds, raising ``historyFloor`` to them. Marks an
  /// earlier version wrote (without a time) are given `time`, or, when `retention` is shorter
  /// than ``historyRetention`` (the file grew too large), dropped as old.
  ///
  /// A grant the record holds reads as current afterwards exactly as before; a grant it no
  /// longer holds, taken before a dropped mark, reads as not current.
  mutating func dropHistory(at time: HostTime, keeping retention: TimeInterval) {
    holders = holders.filter { _, holder in
      guard holder.backOff == nil else { return holder.isLive(at: time) }
      return Self.seconds(since: holder.expiryInstant, at: time) <= retention
    }
    // The oldest generation a grant the record holds may ask with (an earlier version's holder
    // records none: it keeps the whole history).
    let oldest =
      holders.values.lazy.filter { $0.backOff == nil }.map { $0.generation ?? 0 }.min()
      ?? generation
    let untimedAreOld = retention < Self.historyRetention
    var floor = historyFloor
    func due(_ generation: UInt64, _ at: inout HostTime?) -> Bool {
      guard generation <= oldest else { return false }
      guard let stamp = at else {
        if !untimedAreOld { at = time }
        return untimedAreOld
      }
      return Self.seconds(since: stamp, at: time) > retention
    }
    for (account, var mark) in userSignedOut {
      if mark.generation <= floor {
        userSignedOut[account] = nil  // the floor ends the same grants
      } else if due(mark.generation, &mark.at) {
        userSignedOut[account] = nil
        floor = max(floor, mark.generation)
      } else {
        userSignedOut[account] = mark
      }
    }
    for (account, var revocation) in userRevoked {
      if revocation.generation <= floor
        || (userSignedOut[account]?.generation ?? 0) >= revocation.generation
      {
        // The floor, or a sign-out after it, ends the same grants.
        userRevoked[account] = nil
      } else if due(revocation.generation, &revocation.at) {
        userRevoked[account] = nil
        floor = max(floor, revocation.generation)
      } else {
        userRevoked[account] = revocation
      }
    }
    historyFloor = floor
  }
}

extension LeaseRecord.Holder {
  /// The holder's expiry, as a time ``LeaseRecord/seconds(since:at:)`` measures from.
  var expiryInstant: HostTime { HostTime(wall: expiresAt, boot: bootExpiry) }
}
