import Foundation

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// An instant on the host's boot clock: the time since the host booted, on a clock that never
/// steps (setting the wall clock, NTP) and counts while the host sleeps, with the identity of
/// that boot. Every process of the host reads the same clock, so instants of one boot compare
/// across processes; instants of different boots do not compare at all.
///
/// - Linux: `clock_gettime(CLOCK_BOOTTIME)` and `/proc/sys/kernel/random/boot_id`.
/// - Apple platforms: `clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW)` (the continuous clock of
///   `mach_continuous_time`, in nanoseconds) and the `kern.bootsessionuuid` sysctl. Not
///   `kern.boottime`: the kernel moves that date whenever the wall clock is set, so it would
///   name a new "boot" at every clock step.
package struct BootInstant: Sendable, Hashable {
  /// The boot this instant belongs to (a UUID string on the supported platforms).
  package var boot: String
  /// Nanoseconds since that boot.
  package var nanoseconds: UInt64

  package init(boot: String, nanoseconds: UInt64) {
    self.boot = boot
    self.nanoseconds = nanoseconds
  }

  /// The instant `seconds` later (`seconds` negative or NaN counts as zero; saturating).
  package func advanced(bySeconds seconds: Double) -> BootInstant {
    let nanos = seconds > 0 ? min(seconds * 1e9, 1.8e19) : 0
    let (sum, overflow) = nanoseconds.addingReportingOverflow(
      nanos >= 1.8e19 ? UInt64.max : UInt64(nanos))
    return BootInstant(boot: boot, nanoseconds: overflow ? .max : sum)
  }

  /// Seconds from `self` to `later` (negative when `later` is earlier), for instants of one boot.
  package func seconds(to later: BootInstant) -> Double {
    later.nanoseconds >= nanoseconds
      ? Double(later.nanoseconds - nanoseconds) / 1e9
      : -Double(nanoseconds - later.nanoseconds) / 1e9
  }
}

/// One reading of the host's clocks: the wall clock (for the dates reported to callers and the
/// records of older versions) and the boot clock (what expiries are compared on), when the
/// platform has one.
package struct HostTime: Sendable, Equatable {
  package var wall: Date
  package var boot: BootInstant?

  package init(wall: Date, boot: BootInstant?) {
    self.wall = wall
    self.boot = boot
  }
}

/// The clocks a ``FileAuthorizationLease`` reads: injectable, so that a test can step the wall
/// clock and move the boot clock on its own.
package struct HostClock: Sendable {
  package var wall: @Sendable () -> Date
  package var boot: @Sendable () -> BootInstant?

  package init(
    wall: @escaping @Sendable () -> Date, boot: @escaping @Sendable () -> BootInstant?
  ) {
    self.wall = wall
    self.boot = boot
  }

  /// Reads both clocks.
  package func now() -> HostTime { HostTime(wall: wall(), boot: boot()) }

  /// The system's wall clock and boot clock.
  package static let system = HostClock(wall: { Date() }, boot: { systemBootInstant() })

  /// Expiries measured on `now` alone (no boot clock): what a lease given its own clock uses.
  package static func wallOnly(_ now: @escaping @Sendable () -> Date) -> HostClock {
    HostClock(wall: now, boot: { nil })
  }

  /// The current instant of the system's boot clock, or `nil` when the platform has none or
  /// the boot's identity cannot be read.
  package static func systemBootInstant() -> BootInstant? {
    guard let boot = bootIdentity, let nanoseconds = bootClockNanoseconds() else { return nil }
    return BootInstant(boot: boot, nanoseconds: nanoseconds)
  }

  /// The identity of the current boot, read once per process.
  package static let bootIdentity: String? = readBootIdentity()

  private static func bootClockNanoseconds() -> UInt64? {
    #if canImport(Darwin)
      let value = clock_gettime_nsec_np(CLOCK_MONOTONIC_RAW)
      return value == 0 ? nil : value
    #elseif canImport(Glibc) || canImport(Musl)
      var time = timespec()
      guard clock_gettime(CLOCK_BOOTTIME, &time) == 0, time.tv_sec >= 0, time.tv_nsec >= 0
      else { return nil }
      return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    #else
      return nil
    #endif
  }

  private static func readBootIdentity() -> String? {
    #if canImport(Darwin)
      var buffer = [CChar](repeating: 0, count: 64)
      var size = buffer.count
      guard sysctlbyname("kern.bootsessionuuid", &buffer, &size, nil, 0) == 0, size > 1 else {
        return nil
      }
      let bytes = buffer.prefix(size).prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
      return validated(String(decoding: bytes, as: UTF8.self))
    #elseif canImport(Glibc) || canImport(Musl)
      let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else { return nil }
      defer { close(fd) }
      var buffer = [UInt8](repeating: 0, count: 64)
      let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      guard count > 0 else { return nil }
      return validated(String(decoding: buffer.prefix(count), as: UTF8.self))
    #else
      return nil
    #endif
  }

  /// A boot identity as recorded: trimmed, 1 to ``LeaseRecord/maximumBootLength`` bytes.
  private static func validated(_ text: String) -> String? {
    let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
    guard !trimmed.isEmpty, trimmed.utf8.count <= LeaseRecord.maximumBootLength else {
      return nil
    }
    return trimmed
  }
}
