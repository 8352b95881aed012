import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// Heap bytes in use, over all of glibc's arenas, from `malloc_info`.
///
/// `mallinfo2` would be simpler but reports the main arena only, and the concurrency pool's
/// threads allocate in other arenas. `malloc_info` (looked up with `dlsym`, since `<malloc.h>`
/// is not part of the Glibc module) reports every arena; in use = system bytes - free bytes in
/// bins + mmapped bytes. The arenas' top chunks count as in use, so figures move by up to a few
/// hundred KB: negligible per caller at 10k-100k callers, coarse at 1k. Elsewhere the figures
/// are unavailable (nil).
enum Heap {
  #if canImport(Glibc)
    private typealias MallocInfo = @convention(c) (Int32, UnsafeMutablePointer<FILE>?) -> Int32

    private static let mallocInfo: MallocInfo? = {
      guard let program = dlopen(nil, RTLD_NOW), let symbol = dlsym(program, "malloc_info") else {
        return nil
      }
      return unsafeBitCast(symbol, to: MallocInfo.self)
    }()
  #endif

  /// Bytes in use now, or nil when the platform has no counter.
  static func inUse() -> Int? {
    #if canImport(Glibc)
      guard let mallocInfo else { return nil }
      var buffer: UnsafeMutablePointer<CChar>?
      var size = 0
      guard let stream = open_memstream(&buffer, &size) else { return nil }
      let status = mallocInfo(0, stream)
      fclose(stream)
      guard let buffer else { return nil }
      defer { free(buffer) }
      guard status == 0 else { return nil }
      return parse(String(cString: buffer))
    #else
      return nil
    #endif
  }

  /// Reads the totals after the last `</heap>` of `malloc_info`'s XML.
  static func parse(_ xml: String) -> Int? {
    guard let end = xml.range(of: "</heap>", options: .backwards) else { return nil }
    var system: Int?
    var free = 0
    var mapped = 0
    for line in xml[end.upperBound...].split(separator: "\n") {
      guard let size = attribute("size", in: line) else { continue }
      if line.contains("<system type=\"current\"") { system = size }
      if line.contains("<total type=\"fast\"") || line.contains("<total type=\"rest\"") {
        free += size
      }
      if line.contains("<total type=\"mmap\"") { mapped = size }
    }
    return system.map { $0 - free + mapped }
  }

  private static func attribute(_ name: String, in line: Substring) -> Int? {
    guard let start = line.range(of: " \(name)=\"") else { return nil }
    let digits = line[start.upperBound...].prefix { $0.isNumber }
    return Int(digits)
  }

  /// Whether 4,000 blocks of 256 bytes allocated on a pool thread show in `inUse()`.
  static func selfCheck() async -> Bool {
    guard let before = inUse() else { return false }
    let blocks = await Task.detached { () -> [UInt] in
      (0..<4_000).map { _ in
        UInt(bitPattern: UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 16))
      }
    }.value
    let after = inUse() ?? before
    for block in blocks { UnsafeMutableRawPointer(bitPattern: block)?.deallocate() }
    return after - before >= 4_000 * 256
  }
}
