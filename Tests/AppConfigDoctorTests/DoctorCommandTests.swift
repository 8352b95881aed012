import Foundation
import Testing

@testable import authcoord

/// Runs the command and captures what it prints.
private func run(_ arguments: [String]) -> (status: Int32, out: [String], err: [String]) {
  var out: [String] = []
  var err: [String] = []
  let status = DoctorCommand.run(
    arguments, output: { out.append($0) }, errorOutput: { err.append($0) })
  return (status, out, err)
}

/// Writes `contents` to a fresh temporary file.
private func temporaryFile(_ contents: Data) throws -> URL {
  let url = FileManager.default.temporaryDirectory
    .appendingPathComponent("doctor-\(UUID().uuidString).plist")
  try contents.write(to: url)
  return url
}

@Suite("authcoord doctor")
struct DoctorCommandTests {
  @Test func cleanFileExitsZero() throws {
    let path = fixture("good.plist").path
    let result = run([path, "--scheme", "mpaasinsidedemo"])
    #expect(result.status == 0)
    #expect(result.out == ["ok: \(path) is configured for account connect"])
    #expect(result.err.isEmpty)
    #expect(run(["--scheme=mpaasinsidedemo", path]).status == 0)
  }

  @Test func findingsExitOne() throws {
    var plist = goodPlist()
    plist["LSApplicationQueriesSchemes"] = ["alipay"]
    let url = try temporaryFile(
      PropertyListSerialization.data(fromPropertyList: plist, format: .xml, options: 0))
    defer { try? FileManager.default.removeItem(at: url) }
    let result = run([url.path, "--scheme", "otherapp"])
    #expect(result.status == 1)
    #expect(
      result.out == [
        "error: LSApplicationQueriesSchemes: does not contain \"alipays\"; "
          + "the app cannot open Alipay",
        "error: CFBundleURLTypes: does not declare the scheme \"otherapp\" "
          + "(declared: \"mpaasinsidedemo\")",
      ])
  }

  @Test func warningsAloneExitOne() throws {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] = [["CFBundleURLSchemes": ["mpaasinsidedemo", "alipays"]]]
    let url = try temporaryFile(
      PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0))
    defer { try? FileManager.default.removeItem(at: url) }
    let result = run([url.path])
    #expect(result.status == 1)
    #expect(result.out.count == 1)
    let line = try #require(result.out.first)
    #expect(line.hasPrefix("warning: CFBundleURLTypes[0].CFBundleURLSchemes[1]: "))
  }

  @Test func unreadableOrInvalidFileExitsTwo() throws {
    let missing = run([fixture("no-such.plist").path])
    #expect(missing.status == 2)
    #expect(missing.out.isEmpty)
    #expect(missing.err.first?.hasSuffix("no-such.plist: no such file") == true)

    let garbage = try temporaryFile(Data("not a plist at all {".utf8))
    defer { try? FileManager.default.removeItem(at: garbage) }
    #expect(run([garbage.path]).status == 2)
    #expect(run([fixture("invalid.plist").path]).status == 2)
    #expect(run([fixture("top-level-array.plist").path]).status == 2)
  }

  @Test(arguments: [
    [String](), ["--scheme"], ["a.plist", "--scheme"], ["a.plist", "b.plist"], ["--verbose", "a"],
    ["a.plist", "--scheme", "x", "--scheme", "y"], ["a.plist", "--scheme="],
  ])
  func badUsageExitsTwo(_ arguments: [String]) {
    let result = run(arguments)
    #expect(result.status == 2)
    #expect(result.out.isEmpty)
    #expect(result.err.contains { $0.hasPrefix("usage: authcoord doctor") })
  }

  @Test func helpExitsZero() {
    let result = run(["--help"])
    #expect(result.status == 0)
    #expect(result.out.first?.hasPrefix("usage: authcoord doctor") == true)
  }
}
