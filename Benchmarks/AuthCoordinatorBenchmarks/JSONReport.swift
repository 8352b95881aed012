import Foundation

/// Writes the run as JSON (`--json PATH`): machine, command, every repetition of every series
/// with its median, the targets and any violations. Missing figures are written as -1.
enum JSONReport {
  static func write(_ run: RunSummary, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    encoder.nonConformingFloatEncodingStrategy = .convertToString(
      positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(
      at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try encoder.encode(run).write(to: url, options: .atomic)
  }
}
