import Foundation
import Testing

/// The README's service example is the quick start of Examples/ServiceQuickstart, word for
/// word: the lines between `// README: begin` and `// README: end` in its Quickstart.swift are
/// the ```swift block that follows the README's
/// `<!-- service-example: Examples/ServiceQuickstart/Sources/ServiceQuickstart/Quickstart.swift -->`
/// line. That package uses the public API only, and CI builds and runs it against the simulated
/// token server (scripts/ci-example.sh), so the README shows code that compiles and works.
@Suite(.timeLimit(.minutes(2))) struct ReadmeServiceExampleTests {
  static let example = "Examples/ServiceQuickstart/Sources/ServiceQuickstart/Quickstart.swift"

  /// The repository's root: this file is Tests/OAuth2Tests/ReadmeServiceExampleTests.swift.
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  /// The lines of the file at `path` from the root.
  static func lines(of path: String) throws -> [String] {
    let text = try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    return text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
  }

  @Test func theReadmesServiceExampleIsTheQuickstartsCode() throws {
    let source = try Self.lines(of: Self.example)
    let begin = try #require(
      source.firstIndex(of: "// README: begin"), "no `// README: begin` line in \(Self.example)")
    let end = try #require(
      source[begin...].firstIndex(of: "// README: end"),
      "no `// README: end` line after the begin marker in \(Self.example)")
    let example = Array(source[(begin + 1)..<end])
    #expect(source.filter { $0.hasPrefix("// README:") }.count == 2, "one pair of markers")

    let readme = try Self.lines(of: "README.md")
    let comment = "<!-- service-example: \(Self.example) -->"
    let marker = try #require(
      readme.firstIndex(of: comment), "README.md has no line `\(comment)`")
    let fence = try #require(
      readme[(marker + 1)...].firstIndex { !$0.isEmpty }, "nothing follows `\(comment)`")
    try #require(
      readme[fence] == "```swift", "a ```swift block must follow `\(comment)` in README.md")
    let close = try #require(
      readme[(fence + 1)...].firstIndex(of: "```"), "the README's ```swift block is not closed")
    let block = Array(readme[(fence + 1)..<close])

    #expect(
      block == example,
      "README.md's service example differs from \(Self.example): \(Self.difference(block, example))"
    )
  }

  /// The first line where `readme` and `source` differ, for the failure message.
  static func difference(_ readme: [String], _ source: [String]) -> String {
    for (index, (left, right)) in zip(readme, source).enumerated() where left != right {
      return "line \(index + 1) of the block is `\(left)` in README.md, `\(right)` in the source"
    }
    return "README.md's block has \(readme.count) lines, the source's \(source.count)"
  }
}
