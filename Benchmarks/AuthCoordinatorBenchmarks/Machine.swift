import Foundation

/// The machine a run was measured on, for the report and docs/benchmarks.md.
struct Machine: Codable, Sendable {
  var cpu: String
  /// `ProcessInfo.activeProcessorCount`: the cores this process may run on (an affinity mask
  /// or a container's CPU quota can make it fewer than the machine's).
  var activeProcessorCount: Int
  /// `ProcessInfo.processorCount`: the machine's logical cores.
  var logicalCores: Int
  var memoryGiB: Double
  var os: String
  var swift: String

  static func current() -> Machine {
    var cpu = "unknown"
    if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
      let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
      let colon = line.firstIndex(of: ":")
    {
      cpu = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    let info = ProcessInfo.processInfo
    return Machine(
      cpu: cpu, activeProcessorCount: info.activeProcessorCount,
      logicalCores: info.processorCount,
      memoryGiB: (Double(info.physicalMemory) / 1_073_741_824 * 10).rounded() / 10,
      os: info.operatingSystemVersionString, swift: compilerVersion)
  }

  private static var compilerVersion: String {
    #if compiler(>=6.4)
      return "6.4 or later"
    #elseif compiler(>=6.3)
      return "6.3"
    #elseif compiler(>=6.2)
      return "6.2"
    #else
      return "older than 6.2"
    #endif
  }
}
