import Foundation
import Testing

@testable import TokenStore

/// Found by reading in the seams issue: a subscription kept the newest 64 changes, so a burst
/// could drop a sign-out notice silently. Now a dropped sign-out is followed by an all-accounts
/// sign-out with no owner (the subscriber forgets every account and reads the store again).
@Suite struct LeaseChangeBurstTests {
  @Test func aBurstPastTheBufferEndsWithASignOutOfAllInsteadOfLosingOneSilently() async {
    let lease = InMemoryAuthorizationLease()
    let changes = lease.changes()
    let burst = LeaseChange.bufferSize + 100
    for index in 0..<burst {
      await lease.signOut(account: "user-\(index)", by: "other")
    }
    var iterator = changes.makeAsyncIterator()
    var received: [LeaseChange] = []
    for _ in 0..<LeaseChange.bufferSize {
      guard let change = await iterator.next() else { break }
      received.append(change)
    }
    #expect(received.count == LeaseChange.bufferSize)
    #expect(
      received.last == .signedOutAll(by: ""), "the subscriber is told that it missed sign-outs")
    #expect(received.contains(.signedOut(account: "user-\(burst - 1)", by: "other")))
  }

  @Test func aSubscriberThatKeepsUpIsNeverToldUnknown() async {
    let lease = InMemoryAuthorizationLease()
    let changes = lease.changes()
    var iterator = changes.makeAsyncIterator()
    for index in 0..<(LeaseChange.bufferSize * 2) {
      await lease.signOut(account: "user-\(index)", by: "other")
      #expect(await iterator.next() == .signedOut(account: "user-\(index)", by: "other"))
    }
  }
}
