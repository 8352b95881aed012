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

@Suite("authcoord doctor", .timeLimit(.minutes(2)))
struct DoctorCommandTests {
  @Test func cleanFileExitsZero() throws {
    let path = fixture("good.plist").path
    let result = run([path, "--scheme", "mpaasinsidedemo"])
    #expect(result.status == 0)
    #expect(result.out == [DoctorCommand.okLine(path: path, warnings: 0)])
    #expect(result.err.isEmpty)
    #expect(run(["--scheme=mpaasinsidedemo", path]).status == 0)
    #expect(run(["--strict", path]).status == 0)
  }

  @Test("the ok line says only Info.plist was checked and points to the checklist")
  func okLineStatesItsScope() throws {
    let line = DoctorCommand.okLine(path: "Info.plist", warnings: 0)
    #expect(line.hasPrefix("ok: Info.plist: "))
    #expect(line.contains("Only Info.plist was checked"))
    #expect(
      line.contains(
        "\"Steps outside Info.plist\" of the AlipayBridge article \"Integrating the coordinator "
          + "in an iOS app\" (IntegratingInAnIOSApp.md)"))
    #expect(DoctorCommand.okLine(path: "p", warnings: 2).contains("(2 warnings above)"))
  }

  @Test("a correct app with an extra unrelated scheme and a TEST_ code exits 0")
  func correctAppWithExtrasExitsZero() throws {
    let path = fixture("correct-with-extras.plist").path
    let result = run([path, "--scheme", "mpaasinsidedemo"])
    #expect(result.status == 0)
    #expect(
      result.out == [
        "warning: CFBundleURLTypes[1].CFBundleURLSchemes[1]: \"test-deeplinks\" looks like a "
          + "placeholder",
        "warning: MPAuthIdentity.instBizSceneCode: \"TEST_001\" may be a placeholder; check "
          + "that it is the value Alipay support issued",
        DoctorCommand.okLine(path: path, warnings: 2),
      ])
    #expect(result.err.isEmpty)
    // Opt-in strictness turns the warnings into a failure.
    #expect(run([path, "--scheme", "mpaasinsidedemo", "--strict"]).status == 1)
  }

  @Test(
    "the failure fixtures still fail, strict or not",
    arguments: ["placeholders.plist", "wrong-types.plist"])
  func failureFixturesStillFail(name: String) {
    for extra in [[], ["--strict"]] {
      let result = run([fixture(name).path, "--scheme", "mpaasinsidedemo"] + extra)
      #expect(result.status == 1)
      #expect(result.out.contains { $0.hasPrefix("error: ") })
      #expect(!result.out.contains { $0.hasPrefix("ok: ") })
    }
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

  @Test func warningsAloneExitZeroUnlessStrict() throws {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] = [["CFBundleURLSchemes": ["mpaasinsidedemo", "alipays"]]]
    plist["LSApplicationQueriesSchemes"] = (0..<50).map { "app\($0)" } + ["alipay", "alipays"]
    let url = try temporaryFile(
      PropertyListSerialization.data(fromPropertyList: plist, format: .binary, options: 0))
    defer { try? FileManager.default.removeItem(at: url) }
    let result = run([url.path])
    #expect(result.status == 0)
    #expect(result.out.count == 4)
    #expect(result.out.prefix(3).allSatisfy { $0.hasPrefix("warning: ") })
    #expect(
      result.out.contains { $0.hasPrefix("warning: CFBundleURLTypes[0].CFBundleURLSchemes[1]: ") })
    #expect(result.out.last == DoctorCommand.okLine(path: url.path, warnings: 3))
    #expect(run([url.path, "--strict"]).status == 1)
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
