import AuthCoordinator
import Foundation
import Testing

@Suite(.timeLimit(.minutes(2))) struct RefreshPolicyTests {
  @Test(arguments: [
    "NeedRefreshToken", "needRefreshToken", "NEEDREFRESHTOKEN", "needReAuth", "needreauth",
    "needOpenAuth", "NeedOpenAuth",
  ])
  func everyRefreshKeyInAnyCase(key: String) {
    #expect(RefreshPolicy(extendParams: [key: true]) == .force(rejecting: nil))
    #expect(RefreshPolicy(extendParams: [key: "YES"]) == .force(rejecting: nil))
  }

  @Test(
    arguments: [
      (true as any Sendable, true), (false, false), (1, true), (0, false), (2, true), (1.0, true),
      ("YES", true), ("yes", true), ("Yes", true), ("true", true), ("TRUE", true), ("1", true),
      ("NO", false), ("false", false), ("0", false), ("", false), ("maybe", false),
    ] as [(any Sendable, Bool)])
  func valuesThatMeanYes(value: any Sendable, yes: Bool) {
    let policy = RefreshPolicy(extendParams: ["NeedRefreshToken": value])
    #expect(policy == (yes ? .force(rejecting: nil) : .ifNeeded))
  }

  @Test func otherKeysAndNilMeanNoRefresh() {
    #expect(RefreshPolicy(extendParams: nil) == .ifNeeded)
    #expect(RefreshPolicy(extendParams: [:]) == .ifNeeded)
    #expect(RefreshPolicy(extendParams: ["somethingElse": "YES", 42: "YES"]) == .ifNeeded)
  }

  @Test func aKnownRejectedTokenIsCarried() {
    #expect(
      RefreshPolicy(extendParams: ["NeedRefreshToken": "1"], rejectedToken: "t1")
        == .force(rejecting: "t1"))
  }

  #if canImport(ObjectiveC)
    @Test func bridgedNSNumberValues() {
      #expect(
        RefreshPolicy(extendParams: ["NeedRefreshToken": NSNumber(value: true)])
          == .force(rejecting: nil))
      #expect(RefreshPolicy(extendParams: ["NeedRefreshToken": NSNumber(value: 0)]) == .ifNeeded)
    }
  #endif
}
