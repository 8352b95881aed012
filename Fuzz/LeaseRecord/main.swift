// libFuzzer entry point for the lease-file decoder (LeaseRecord.decode).
//
// Not part of `swift build`: scripts/fuzz-lease.sh compiles this file together with the few
// TokenStore sources the lease record needs, with `-sanitize=fuzzer,address`, and runs it.
//
// Properties checked for every input:
//   - decoding never traps, overflows, leaks or reads out of bounds (AddressSanitizer);
//   - a failure is one of the decoder's documented codes;
//   - every holder of a decoded record is plausible (its boot-clock expiry, of the reader's boot,
//     at most ten years ahead; its wall-clock date one `Date` arithmetic handles), and the
//     coordinator's wait for it (the date the lease reports, minus now, turned into a
//     `Duration`) never traps, read by a reader with a boot clock and by one without;
//   - whatever decodes re-encodes, and the re-encoded file decodes to the same record;
//   - comparing a decoded record with a fresh one (what the watcher announces) never traps;
//   - a back-off's failures and end are clamped (LeaseBackOff.maximumFailures, maximumDuration);
//   - dropping the history (LeaseRecord.dropHistory) changes no answer of `isCurrent` for a
//     grant the record still holds, and makes no grant current that was not.
// Each input is decoded three times: as a whole file, and spliced into a consistent record as
// the holder's `expiresAt` and as its `bootExpiresAt`, so mutations reach the expiry checks
// instead of being stopped by the JSON.

import Foundation

/// The reader's clocks: fixed, so that a crash replays. The boot is the one the seeds name.
let now = Date(timeIntervalSinceReferenceDate: 800_000_000)
let readers = [
  HostTime(wall: now, boot: BootInstant(boot: "b1", nanoseconds: 5_000_000_000_000)),
  HostTime(wall: now, boot: nil),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func leaseRecordFuzzTest(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let data = start.map { Data(bytes: $0, count: count) } ?? Data()
  for time in readers {
    check(data, at: time)
    check(spliced(data), at: time)
    check(splicedBoot(data), at: time)
  }
  return 0
}

/// A consistent record whose one holder's `expiresAt` is `number`'s bytes.
func spliced(_ number: Data) -> Data {
  Data(
    #"{"floor":0,"format":"authcoordinator.lease","generation":3,"holders":[{"expiresAt":"#.utf8)
    + number
    + Data(
      (#","fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"owner":"w"}],"nextFence":2,"#
        + #""userSignedOut":[{"by":"a","generation":2,"mcUid":"u1"}],"version":1}"#).utf8)
}

/// A consistent record whose one holder's `bootExpiresAt` (of the reader's boot) is `number`'s
/// bytes.
func splicedBoot(_ number: Data) -> Data {
  Data(
    (#"{"floor":0,"format":"authcoordinator.lease","generation":3,"holders":[{"boot":"b1","#
      + #""bootExpiresAt":"#).utf8)
    + number
    + Data(
      (#","expiresAt":800000030,"fence":1,"key":{"mcUid":"u1","mode":"platformOnly"},"#
        + #""owner":"w"}],"nextFence":2,"#
        + #""userSignedOut":[{"by":"a","generation":2,"mcUid":"u1"}],"version":1}"#).utf8)
}

func check(_ data: Data, at time: HostTime) {
  let record: LeaseRecord
  do {
    record = try LeaseRecord.decode(data, at: time)
  } catch {
    let expected: [TokenStoreError.Code] = [.corruptFile, .unsupportedVersion]
    precondition(expected.contains(error.code), "unexpected decode error code \(error.code)")
    return
  }
  for holder in record.holders.values {
    precondition(LeaseRecord.isPlausible(holder, at: time), "an implausible holder was decoded")
    if let backOff = holder.backOff {
      // What a process adopts from a back-off: clamped, so its arithmetic never overflows.
      precondition(backOff.failures <= LeaseBackOff.maximumFailures, "unclamped failures")
      precondition(
        holder.expiry(at: time).timeIntervalSince(time.wall)
          <= LeaseBackOff.maximumDuration.seconds + 0.001, "an unclamped back-off")
    }
    // What the lease reports and the flight runner computes while it waits for this holder.
    _ = holder.isLive(at: time)
    let until = holder.expiry(at: time)
    let lapse = Duration.saturating(seconds: until.timeIntervalSince(now))
    precondition(lapse >= .zero && lapse <= Duration.saturationLimit, "the lapse is out of range")
    // A renewal of it, a year long (the longest time to live), stays plausible.
    let renewed = LeaseRecord.Holder.lasting(
      LeaseRecord.maximumTimeToLive, owner: holder.owner, fence: holder.fence, from: time)
    precondition(LeaseRecord.isPlausible(renewed, at: time), "a renewal is implausible")
  }
  // Dropping history changes no answer of `isCurrent` for a grant the record still holds, and
  // never makes current a grant that was not.
  for retention in [LeaseRecord.historyRetention, LeaseRecord.minimumHistoryRetention] {
    var pruned = record
    pruned.dropHistory(at: time, keeping: retention)
    for (key, holder) in pruned.holders where holder.backOff == nil {
      let grant = LeaseGrant(
        key: key, owner: holder.owner, fence: holder.fence, generation: holder.generation ?? 0,
        expiresAt: holder.expiresAt)
      precondition(
        pruned.isCurrent(grant) == record.isCurrent(grant), "dropping history changed a grant")
    }
    for generation in [0, pruned.historyFloor, record.generation] {
      for account in Array(record.userSignedOut.keys.prefix(4)) + ["nobody"] {
        let grant = LeaseGrant(
          key: AccountKey(account: account), owner: "w", fence: 1, generation: generation,
          expiresAt: now)
        precondition(
          !pruned.isCurrent(grant) || record.isCurrent(grant), "dropping history revived a grant")
      }
    }
  }
  let fresh = LeaseRecord.fresh(after: record, wallClock: now)
  _ = record.changes(since: fresh, at: time)
  _ = fresh.changes(since: record, at: time)
  let encoded: Data
  do {
    encoded = try record.encoded()
  } catch {
    preconditionFailure("a decoded lease record failed to encode: \(error.code)")
  }
  do {
    let again = try LeaseRecord.decode(encoded, at: time)
    precondition(again == record, "decode(encode(record)) differs from record")
  } catch {
    preconditionFailure("a re-encoded lease record failed to decode: \(error.code)")
  }
}
