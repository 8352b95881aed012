import AlipayBridge
import AuthCoordinator
import Foundation
import Testing

/// The bridge's `mcUid` spellings are the core's account under another name, and the wire key
/// of a key's account is still `mcUid` (files and rows already hold it).
@Suite(.timeLimit(.minutes(1))) struct AlipayAccountNamesTests {
  @Test func aKeyByEitherNameIsOneKey() throws {
    var key = AccountKey(mcUid: "Jose\u{301}", mode: "read")
    #expect(key == AccountKey(account: "Jos\u{e9}", mode: "read"))
    #expect(Array(key.mcUid.utf8) == Array(key.account.utf8), "normalized either way")
    key.mcUid = "u2"
    #expect(key.account == "u2")
    #expect(key.description == "u2/read")
  }

  @Test func theWireKeyOfTheAccountIsStillMcUid() throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = .sortedKeys
    let data = try encoder.encode(AccountKey(account: "u1"))
    #expect(String(decoding: data, as: UTF8.self) == #"{"mcUid":"u1","mode":"platformOnly"}"#)
    #expect(try JSONDecoder().decode(AccountKey.self, from: data) == AccountKey(mcUid: "u1"))
  }

  @Test func aStatusChangeByEitherNameIsOneChange() {
    #expect(AccountStatusChange.logout(mcUid: "u1") == .logout(account: "u1"))
    #expect(AccountStatusChange.unbind(mcUid: "u1") == .unbind(account: "u1"))
    #expect(AccountStatusChange.unbind(mcUid: "u1").mcUid == "u1")
    #expect(AccountStatusChange.logoutAll.mcUid == nil)
  }
}
