import Testing

@testable import AuthCoordinator

/// The account table's stripe choice, tested synchronously.
@Suite(.timeLimit(.minutes(2))) struct AccountTableTests {
  /// A user lands in one stripe whatever the representation of their id's bytes: the hash of a
  /// contiguous buffer (native strings) and of a plain UTF-8 view (the path of strings without
  /// contiguous storage) agree.
  @Test func everyRepresentationOfAUserIdHashesAlike() {
    for id in [
      "u1", "user-0001", "2088000000000001", "ü-é-中文-👩‍💻", "", String(repeating: "x", count: 40),
    ] {
      let contiguous = Array(id.utf8).withUnsafeBufferPointer { AccountTable.stripeHash(of: $0) }
      #expect(contiguous == AccountTable.stripeHash(of: id.utf8), "\(id)")
    }
  }

  /// All modes of a user share a stripe, and sequential ids spread over the stripes.
  @Test func modesShareAStripeAndSequentialIdsSpread() {
    let table = AccountTable(stripeCount: 8)
    let a = AccountKey(account: "user-17")
    let b = AccountKey(account: "user-17", mode: "other")
    #expect(table.stripe(for: a) === table.stripe(for: b))
    let used = Set((0..<64).map { ObjectIdentifier(table.stripe(forUser: "user-\($0)")) })
    #expect(used.count == 8, "64 sequential ids used \(used.count) of 8 stripes")
  }
}
