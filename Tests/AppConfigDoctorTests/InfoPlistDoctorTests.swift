import AppConfigDoctor
import Foundation
import Testing

/// The committed fixtures, found next to this file.
func fixture(_ name: String) -> URL {
  URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("Fixtures").appendingPathComponent(name)
}

/// A good plist as a dictionary, to break one key at a time.
func goodPlist() -> [String: Any] {
  [
    "LSApplicationQueriesSchemes": ["alipay", "alipays"],
    "CFBundleURLTypes": [["CFBundleURLSchemes": ["mpaasinsidedemo"]]],
    "MPAuthIdentity": ["instBizSceneCode": "SCENE_2021_0001", "instCampaignIds": "CAMP8849302"],
  ]
}

@Suite("InfoPlistDoctor.check", .timeLimit(.minutes(2)))
struct InfoPlistDoctorCheckTests {
  @Test func goodFixtureIsClean() throws {
    let plist = try InfoPlistDoctor.load(contentsOf: fixture("good.plist"))
    #expect(InfoPlistDoctor.check(plist: plist, scheme: nil).isEmpty)
    #expect(InfoPlistDoctor.check(plist: plist, scheme: "mpaasinsidedemo").isEmpty)
    #expect(InfoPlistDoctor.check(plist: plist, scheme: "MPaaSInsideDemo").isEmpty)
  }

  @Test func mpAuthIdentityIsOptional() {
    var plist = goodPlist()
    plist["MPAuthIdentity"] = nil
    #expect(InfoPlistDoctor.check(plist: plist, scheme: nil).isEmpty)
  }

  @Test func missingQuerySchemes() {
    var plist = goodPlist()
    plist["LSApplicationQueriesSchemes"] = nil
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.count == 1)
    #expect(findings.first?.severity == .error)
    #expect(findings.first?.keyPath == "LSApplicationQueriesSchemes")
  }

  @Test(arguments: ["alipay", "alipays"])
  func missingOneQueryScheme(_ scheme: String) {
    var plist = goodPlist()
    let kept = ["alipay", "alipays"].filter { $0 != scheme }
    plist["LSApplicationQueriesSchemes"] = ["weixin"] + kept
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.map(\.keyPath) == ["LSApplicationQueriesSchemes"])
    #expect(findings.first?.message.contains("\"\(scheme)\"") == true)
  }

  @Test func querySchemeBeyondTheFiftiethIsAWarning() {
    var plist = goodPlist()
    plist["LSApplicationQueriesSchemes"] = (0..<50).map { "app\($0)" } + ["alipay", "alipays"]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.count == 2)
    #expect(findings.allSatisfy { $0.severity == .warning })
  }

  @Test func nonStringQuerySchemeEntry() {
    var plist = goodPlist()
    plist["LSApplicationQueriesSchemes"] = ["alipay", 7, "alipays"] as [Any]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.map(\.keyPath) == ["LSApplicationQueriesSchemes[1]"])
    #expect(findings.first?.message == "must be a string, found a number")
  }

  @Test func wrongTypesFixture() throws {
    let plist = try InfoPlistDoctor.load(contentsOf: fixture("wrong-types.plist"))
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(
      findings.map(\.description) == [
        "error: LSApplicationQueriesSchemes: must be an array of strings, found a string",
        "error: CFBundleURLTypes: must be an array of dictionaries, found a dictionary",
        "error: MPAuthIdentity: must be a dictionary, found a string",
      ])
  }

  @Test func missingURLTypes() {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] = nil
    let findings = InfoPlistDoctor.check(plist: plist, scheme: "mpaasinsidedemo")
    #expect(findings.map(\.keyPath) == ["CFBundleURLTypes"])
    #expect(findings.first?.severity == .error)
  }

  @Test func urlTypesWithoutSchemes() {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] = [["CFBundleURLName": "x"], ["CFBundleURLSchemes": [String]()]]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.map(\.keyPath) == ["CFBundleURLTypes"])
    #expect(findings.first?.message.contains("declares no URL scheme") == true)
  }

  @Test func urlTypeElementsOfTheWrongType() {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] =
      [
        "mpaasinsidedemo", ["CFBundleURLSchemes": "mpaasinsidedemo"],
        ["CFBundleURLSchemes": [true, "good-scheme"]],
      ] as [Any]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(
      findings.map(\.description) == [
        "error: CFBundleURLTypes[0]: must be a dictionary, found a string",
        "error: CFBundleURLTypes[1].CFBundleURLSchemes: must be an array of strings, "
          + "found a string",
        "error: CFBundleURLTypes[2].CFBundleURLSchemes[0]: must be a string, found a boolean",
      ])
  }

  @Test func expectedSchemeNotDeclared() {
    let findings = InfoPlistDoctor.check(plist: goodPlist(), scheme: "otherapp")
    #expect(findings.map(\.keyPath) == ["CFBundleURLTypes"])
    #expect(findings.first?.message.contains("\"otherapp\"") == true)
    #expect(findings.first?.message.contains("\"mpaasinsidedemo\"") == true)
  }

  @Test func invalidOrSuspiciousDeclaredSchemes() {
    var plist = goodPlist()
    plist["CFBundleURLTypes"] = [
      ["CFBundleURLSchemes": ["my_app", "9lives", "alipays", "your-scheme", "good.app+x"]]
    ]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.map(\.severity) == [.error, .error, .warning, .warning])
    #expect(
      findings.map(\.keyPath) == (0..<4).map { "CFBundleURLTypes[0].CFBundleURLSchemes[\($0)]" })
  }

  @Test func placeholderFixture() throws {
    let plist = try InfoPlistDoctor.load(contentsOf: fixture("placeholders.plist"))
    let findings = InfoPlistDoctor.check(plist: plist, scheme: "mpaasinsidedemo")
    #expect(
      findings.map(\.keyPath) == [
        "MPAuthIdentity.instBizSceneCode", "MPAuthIdentity.instCampaignIds",
      ])
    #expect(findings.allSatisfy { $0.severity == .error && $0.message.contains("placeholder") })
  }

  @Test func authIdentityMissingEmptyOrWrongType() {
    var plist = goodPlist()
    plist["MPAuthIdentity"] = ["instBizSceneCode": "  ", "instCampaignIds": 42] as [String: Any]
    var findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(
      findings.map(\.message) == [
        "is empty; ask Alipay support for the value", "must be a string, found a number",
      ])
    plist["MPAuthIdentity"] = [String: Any]()
    findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.count == 2)
    #expect(findings.allSatisfy { $0.message.hasPrefix("missing") })
  }

  @Test(arguments: [
    "业务场景标识（替换为实际值）", "活动标识（替换为实际值）", "请填写活动标识", "xxx", "XXXX", "x.x.x",
    "<instBizSceneCode>", "${SCENE_CODE}", "{{campaign}}", "[campaign id]", "your_scene_code",
    "YOUR-CAMPAIGN-ID", "TODO", "placeholder", "change me", "REPLACE_ME", " xxx ",
  ])
  func placeholders(_ value: String) {
    #expect(InfoPlistDoctor.isPlaceholder(value))
    var plist = goodPlist()
    plist["MPAuthIdentity"] = ["instBizSceneCode": value, "instCampaignIds": "CAMP8849302"]
    #expect(
      InfoPlistDoctor.check(plist: plist, scheme: nil).map(\.keyPath) == [
        "MPAuthIdentity.instBizSceneCode"
      ])
  }

  @Test(arguments: ["SCENE_2021_0001", "CAMP8849302", "2088xxx123", "mpaasinsidedemo", "x1"])
  func realValues(_ value: String) {
    #expect(!InfoPlistDoctor.isPlaceholder(value))
    #expect(!InfoPlistDoctor.mayBePlaceholder(value))
  }

  @Test(
    "a value that only may be a placeholder is a warning, not an error",
    arguments: ["TEST_001", "test-2021", "Sample2", "demo_scene_01", "DUMMY-9"])
  func suspiciousValuesWarn(_ value: String) {
    #expect(!InfoPlistDoctor.isPlaceholder(value))
    #expect(InfoPlistDoctor.mayBePlaceholder(value))
    var plist = goodPlist()
    plist["MPAuthIdentity"] = ["instBizSceneCode": value, "instCampaignIds": "CAMP8849302"]
    let findings = InfoPlistDoctor.check(plist: plist, scheme: nil)
    #expect(findings.map(\.keyPath) == ["MPAuthIdentity.instBizSceneCode"])
    #expect(findings.map(\.severity) == [.warning])
  }
}

@Suite("InfoPlistDoctor.load", .timeLimit(.minutes(2)))
struct InfoPlistDoctorLoadTests {
  @Test func binaryPlist() throws {
    let data = try PropertyListSerialization.data(
      fromPropertyList: goodPlist(), format: .binary, options: 0)
    #expect(data.starts(with: Array("bplist00".utf8)))
    let url = FileManager.default.temporaryDirectory
      .appendingPathComponent("doctor-\(UUID().uuidString).plist")
    try data.write(to: url)
    defer { try? FileManager.default.removeItem(at: url) }
    let plist = try InfoPlistDoctor.load(contentsOf: url)
    #expect(InfoPlistDoctor.check(plist: plist, scheme: "mpaasinsidedemo").isEmpty)
  }

  @Test func missingFile() {
    let url = fixture("no-such.plist")
    #expect(throws: InfoPlistLoadError(.unreadable, path: url.path, message: "no such file")) {
      _ = try InfoPlistDoctor.load(contentsOf: url)
    }
  }

  @Test func directory() {
    let url = fixture("")
    do {
      _ = try InfoPlistDoctor.load(contentsOf: url)
      Issue.record("loaded a directory")
    } catch {
      #expect(error.code == .unreadable)
      #expect(error.message == "is a directory")
    }
  }

  @Test func invalidPlist() {
    do {
      _ = try InfoPlistDoctor.load(contentsOf: fixture("invalid.plist"))
      Issue.record("loaded an invalid plist")
    } catch {
      #expect(error.code == .invalid)
    }
  }

  @Test func topLevelArray() {
    do {
      _ = try InfoPlistDoctor.load(contentsOf: fixture("top-level-array.plist"))
      Issue.record("loaded a top-level array")
    } catch {
      #expect(error.code == .notADictionary)
    }
  }
}
