import Foundation

/// The machine a run was measured on, for the report and docs/benchmarks.md.
struct Machine: Codable, Sendable {
  var cpu: String
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
      cpu: cpu, logicalCores: info.activeProcessorCount,
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
