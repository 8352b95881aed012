// libFuzzer entry point for the lease-file decoder (LeaseRecord.decode).
//
// Not part of `swift build`: scripts/fuzz-lease.sh compiles this file together with the few
// TokenStore sources the lease record needs, with `-sanitize=fuzzer,address`, and runs it.
//
// Properties checked for every input:
//   - decoding never traps, overflows, leaks or reads out of bounds (AddressSanitizer);
//   - a failure is one of the decoder's documented codes;
//   - every holder of a decoded record expires at a plausible date, and the coordinator's wait
//     for it (a `Date` difference turned into a `Duration`) never traps;
//   - whatever decodes re-encodes, and the re-encoded file decodes to the same record;
//   - comparing a decoded record with a fresh one (what the watcher announces) never traps.
// Each input is decoded twice: as a whole file, and spliced as the holder's `expiresAt` into a
// consistent record, so mutations reach the expiry check instead of being stopped by the JSON.

import Foundation

/// The reader's wall clock: fixed, so that a crash replays.
let now = Date(timeIntervalSinceReferenceDate: 800_000_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func leaseRecordFuzzTest(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
  let data = start.map { Data(bytes: $0, count: count) } ?? Data()
  check(data)
  check(spliced(data))
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

func check(_ data: Data) {
  let record: LeaseRecord
  do {
    record = try LeaseRecord.decode(data, now: now)
  } catch {
    let expected: [TokenStoreError.Code] = [.corruptFile, .unsupportedVersion]
    precondition(expected.contains(error.code), "unexpected decode error code \(error.code)")
    return
  }
  for holder in record.holders.values {
    let seconds = holder.expiresAt.timeIntervalSinceReferenceDate
    precondition(
      LeaseRecord.isPlausibleExpiry(seconds, now: now), "an implausible expiry was decoded")
    // What the flight runner computes while it waits for this holder.
    let lapse = Duration.saturating(seconds: holder.expiresAt.timeIntervalSince(now))
    precondition(lapse >= .zero && lapse <= Duration.saturationLimit, "the lapse is out of range")
  }
  _ = record.changes(since: LeaseRecord.fresh(after: record, wallClock: now), now: now)
  _ = LeaseRecord.fresh(after: record, wallClock: now).changes(since: record, now: now)
  let encoded: Data
  do {
    encoded = try record.encoded()
  } catch {
    preconditionFailure("a decoded lease record failed to encode: \(error.code)")
  }
  do {
    let again = try LeaseRecord.decode(encoded, now: now)
    precondition(again == record, "decode(encode(record)) differs from record")
  } catch {
    preconditionFailure("a re-encoded lease record failed to decode: \(error.code)")
  }
}
