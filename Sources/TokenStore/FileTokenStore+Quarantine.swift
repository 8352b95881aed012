import Dispatch
import Foundation
import SyncPrimitives

#if canImport(Darwin)
  import Darwin
#elseif canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

// Bad files moved aside as `<name>.corrupt-<timestamp>`, and the bound on how many are kept.
extension FileTokenStore {
  /// Renames the store file to `<name>.corrupt-<UTC timestamp>`.
  ///
  /// - Returns: The new file name.
  func moveAsideBadFile() throws(TokenStoreError) -> String {
    let stamp = Self.timestamp()
    var candidate = "\(fileName).corrupt-\(stamp)"
    var attempt = 1
    var info = stat()
    while lstat("\(directoryPath)/\(candidate)", &info) == 0 {
      attempt += 1
      candidate = "\(fileName).corrupt-\(stamp)-\(attempt)"
    }
    guard rename(path, "\(directoryPath)/\(candidate)") == 0 else {
      throw systemError("rename", errno, "A bad store file cannot be moved aside.", path: path)
    }
    syncDirectory()
    return candidate
  }

  /// Deletes the moved-aside copies `<name>.corrupt-*` but the newest `keepingNewest`. Runs
  /// under the file lock. Anything there that is not a regular file is left alone.
  func deleteQuarantinedFiles(keepingNewest: Int) throws(TokenStoreError) {
    let names: [String]
    do {
      names = try FileManager.default.contentsOfDirectory(atPath: directoryPath)
    } catch {
      throw TokenStoreError(
        .ioFailure, "The store's directory cannot be listed to delete quarantined copies.",
        path: directoryPath)
    }
    let prefix = "\(fileName).corrupt-"
    // `<stamp>` or `<stamp>-<n>` (a name taken within the same millisecond); stamps sort by
    // time as text.
    let copies = names.filter { $0.hasPrefix(prefix) }.map { name in
      let rest = name.dropFirst(prefix.count)
      let parts = rest.split(separator: "-", maxSplits: 1)
      let attempt = parts.count == 2 ? Int(parts[1]) ?? 0 : 1
      return (name: name, stamp: String(parts.first ?? ""), attempt: attempt)
    }.sorted { ($0.stamp, $0.attempt) < ($1.stamp, $1.attempt) }
    for copy in copies.dropLast(keepingNewest) {
      let copyPath = "\(directoryPath)/\(copy.name)"
      var info = stat()
      guard lstat(copyPath, &info) == 0, FileIdentity(info).isRegularFile else { continue }
      if unlink(copyPath) != 0 && errno != ENOENT {
        throw systemError(
          "unlink", errno, "A quarantined copy of a bad store file cannot be deleted.",
          path: copyPath)
      }
    }
  }

  /// `20261129T204306.123Z`, from the wall clock.
  static func timestamp() -> String {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    var seconds = now.tv_sec
    var parts = tm()
    gmtime_r(&seconds, &parts)
    func pad(_ value: Int32, _ width: Int) -> String {
      let text = String(value)
      return String(repeating: "0", count: max(0, width - text.count)) + text
    }
    let millis = Int32(now.tv_nsec / 1_000_000)
    return pad(parts.tm_year + 1900, 4) + pad(parts.tm_mon + 1, 2) + pad(parts.tm_mday, 2)
      + "T" + pad(parts.tm_hour, 2) + pad(parts.tm_min, 2) + pad(parts.tm_sec, 2)
      + "." + pad(millis, 3) + "Z"
  }
}
