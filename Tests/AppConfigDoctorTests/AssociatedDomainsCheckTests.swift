import AppConfigDoctor
import Foundation
import Testing

@testable import authcoord

/// Runs `authcoord doctor` and captures what it prints.
private func doctor(_ arguments: [String]) -> (status: Int32, out: [String], err: [String]) {
  var out: [String] = []
  var err: [String] = []
  let status = DoctorCommand.run(
    arguments, output: { out.append($0) }, errorOutput: { err.append($0) })
  return (status, out, err)
}

@Suite("the associated-domain check for a universal link", .timeLimit(.minutes(2)))
struct AssociatedDomainsCheckTests {
  static let link = "https://example.com/alipay/"
  static let key = "com.apple.developer.associated-domains"

  @Test("opted in, entitlements without applinks:<host>: an error with its code")
  func optedInMissingEntitlementIsAFinding() {
    let good = fixture("good.plist").path
    let entitlements = fixture("entitlements-no-applinks.plist").path
    let result = doctor([
      good, "--scheme", "mpaasinsidedemo", "--universal-link", Self.link, "--entitlements",
      entitlements,
    ])
    #expect(result.status == 1)
    #expect(
      result.out == [
        "error: \(Self.key): does not contain \"applinks:example.com\"; iOS will not open the "
          + "app for Alipay's universal-link returns [associated_domain_missing]"
      ])
    #expect(result.err.isEmpty)

    let empty = fixture("entitlements-empty.plist").path
    let missingKey = doctor([good, "--universal-link", Self.link, "--entitlements", empty])
    #expect(missingKey.status == 1)
    #expect(
      missingKey.out == [
        "error: \(Self.key): missing; add \"applinks:example.com\", or iOS will not open the app "
          + "for Alipay's universal-link returns [associated_domain_missing]"
      ])
  }

  @Test("opted in, entitlements with applinks:<host>: no finding")
  func optedInPresentEntitlementIsClean() {
    let good = fixture("good.plist").path
    let entitlements = fixture("entitlements-applinks.plist").path
    let result = doctor([
      good, "--universal-link=HTTPS://Example.com/alipay/", "--entitlements=\(entitlements)",
    ])
    #expect(result.status == 0)
    #expect(
      result.out == [DoctorCommand.okLine(path: good, warnings: 0, entitlements: entitlements)])
    #expect(result.out.first?.contains("associated domain") == true)
  }

  @Test("not opted in: nothing about associated domains, whatever the entitlements")
  func notOptedInSaysNothing() {
    let good = fixture("good.plist").path
    let result = doctor([good, "--scheme", "mpaasinsidedemo"])
    #expect(result.status == 0)
    #expect(result.out == [DoctorCommand.okLine(path: good, warnings: 0)])
    #expect(!result.out.joined().contains("associated"))
    #expect(!result.out.joined().contains("applinks"))
  }

  @Test(arguments: [
    ["--universal-link", link], ["--entitlements", "e.plist"],
    ["--universal-link", "http://example.com/alipay/", "--entitlements", "e.plist"],
    ["--universal-link", "example.com", "--entitlements", "e.plist"],
    ["--universal-link", link, "--universal-link", link, "--entitlements", "e.plist"],
    ["--universal-link", "--entitlements", "e.plist"], ["--entitlements="],
  ])
  func badUniversalLinkUsageExitsTwo(_ extra: [String]) {
    let result = doctor([fixture("good.plist").path] + extra)
    #expect(result.status == 2)
    #expect(result.out.isEmpty)
    #expect(result.err.contains { $0.hasPrefix("usage: authcoord doctor") })
  }

  @Test func unreadableEntitlementsExitTwo() {
    let result = doctor([
      fixture("good.plist").path, "--universal-link", Self.link, "--entitlements",
      fixture("no-such.entitlements").path,
    ])
    #expect(result.status == 2)
    #expect(result.err.first?.hasSuffix("no-such.entitlements: no such file") == true)
  }

  @Test(
    "entries that cover the host, and entries that do not",
    arguments: [
      ("applinks:example.com", true), ("APPLINKS:EXAMPLE.COM", true),
      ("applinks:example.com?mode=developer", true), ("applinks:*.com", true),
      ("webcredentials:example.com", false), ("activitycontinuation:example.com", false),
      ("applinks:www.example.com", false), ("applinks:*.example.com", false),
      ("applinks:example.com.evil.net", false), ("applinks:", false),
    ])
  func entryMatching(entry: String, matches: Bool) {
    let findings = AssociatedDomainsCheck.check(
      entitlements: [Self.key: [entry]], universalLinkHost: "example.com")
    #expect(findings.isEmpty == matches)
    if !matches {
      #expect(findings.map(\.code) == [.associatedDomainMissing])
    }
  }

  @Test func wrongTypesAreInvalid() {
    var findings = AssociatedDomainsCheck.check(
      entitlements: [Self.key: "applinks:example.com"], universalLinkHost: "example.com")
    #expect(findings.map(\.code) == [.associatedDomainsInvalid])
    #expect(
      findings.first?.message.hasPrefix("must be an array of strings, found a string") == true)
    findings = AssociatedDomainsCheck.check(
      entitlements: [Self.key: [7, "applinks:example.com"] as [Any]],
      universalLinkHost: "example.com")
    #expect(findings.map(\.keyPath) == ["\(Self.key)[0]"])
    #expect(findings.map(\.code) == [.associatedDomainsInvalid])
  }

  @Test func hostOfUniversalLink() {
    #expect(
      AssociatedDomainsCheck.host(ofUniversalLink: "https://Example.COM/alipay/") == "example.com")
    #expect(AssociatedDomainsCheck.host(ofUniversalLink: "http://example.com/") == nil)
    #expect(AssociatedDomainsCheck.host(ofUniversalLink: "https:///x") == nil)
    #expect(AssociatedDomainsCheck.host(ofUniversalLink: "https://u@example.com/") == nil)
  }

  @Test("findings without a code print as before; with one, the code follows in brackets")
  func descriptionShowsTheCode() {
    #expect(Finding(.error, "K", "m").description == "error: K: m")
    #expect(
      Finding(.error, "K", "m", code: .associatedDomainMissing).description
        == "error: K: m [associated_domain_missing]")
  }
}
