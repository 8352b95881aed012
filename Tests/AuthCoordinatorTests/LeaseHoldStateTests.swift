import Foundation
import Testing

@testable import AuthCoordinator

/// Rules 16 and 22 in a lease hold's decisions, without tasks or clocks: renewals every third of
/// the time to live counted from when each was sent, a failed renewal retried every twelfth
/// until the grant would lapse, the maximum hold, and whether the grant may cover a token
/// request (a third of its time to live ahead).
@Suite(.timeLimit(.minutes(1))) struct LeaseHoldStateTests {
  /// A grant asked for at 10 s, time to live 12 s, maximum hold 60 s.
  func hold() -> LeaseHoldState {
    LeaseHoldState(grantedAt: .seconds(10), timeToLive: .seconds(12), maximumHold: .seconds(60))
  }

  @Test func aGrantCountsFromWhenItWasAskedFor() {
    let hold = hold()
    #expect(hold.confirmedUntil == .seconds(22))
    #expect(hold.wakeAt == .seconds(14), "the first renewal a third of the time to live later")
    #expect(hold.confirms(at: .seconds(10)))
    #expect(hold.confirms(at: .milliseconds(17_999)))
    #expect(!hold.confirms(at: .seconds(18)), "less than a third of its time to live left")
    #expect(!hold.confirms(at: .seconds(30)), "lapsed")
  }

  @Test func aRenewalCountsFromWhenItWasSentNotAnswered() {
    var hold = hold()
    let due = hold.renewalDue(at: .seconds(14))
    #expect(due == .renew)
    // Sent at 14 s, answered after a pause at 25 s: the grant is this holder's until 26 s only.
    hold.renewed(sentAt: .seconds(14))
    #expect(hold.confirmedUntil == .seconds(26))
    #expect(hold.wakeAt == .seconds(18))
    #expect(!hold.confirms(at: .seconds(25)), "one second left: no token request")
    #expect(hold.isHeld, "held all the same: a save may still renew it")
  }

  @Test func anOlderRenewalNeverShortensTheHold() {
    var hold = hold()
    hold.renewed(sentAt: .seconds(20))
    hold.renewed(sentAt: .seconds(15))
    #expect(hold.confirmedUntil == .seconds(32))
    #expect(hold.wakeAt == .seconds(24))
  }

  @Test func aFailedRenewalIsRetriedEveryTwelfthUntilTheGrantWouldLapse() {
    var hold = hold()
    var now = Duration.seconds(14)
    var retries: [Duration] = []
    while hold.renewalDue(at: now) == .renew, !hold.renewalFailed(at: now) {
      retries.append(hold.wakeAt)
      now = hold.wakeAt
    }
    // A twelfth of 12 s is 1 s: retries at 15 ... 21 s; the one at 22 s would be too late.
    #expect(retries == (15...21).map { .seconds($0) })
    #expect(hold.status == .lost)
    #expect(!hold.confirms(at: now))
    let after = hold.renewalDue(at: now + .seconds(1))
    #expect(after == .stop)
  }

  @Test func aRenewalAfterFailuresPutsTheScheduleBack() {
    var hold = hold()
    let lost = hold.renewalFailed(at: .seconds(14))
    #expect(!lost)
    #expect(hold.wakeAt == .seconds(15))
    hold.renewed(sentAt: .seconds(15))
    #expect(hold.wakeAt == .seconds(19))
    #expect(hold.confirmedUntil == .seconds(27))
  }

  @Test func theMaximumHoldGivesTheLeaseUpOnce() {
    var hold = hold()
    var now = Duration.seconds(14)
    while case .renew = hold.renewalDue(at: now) {
      hold.renewed(sentAt: now)
      now = hold.wakeAt
    }
    #expect(now == .seconds(70), "the hold ends 60 s after the grant was asked for")
    #expect(hold.status == .over)
    #expect(!hold.isHeld)
    let again = hold.renewalDue(at: now)
    #expect(again == .stop, "given up once")
    let lostAfter = hold.end(.lost)
    #expect(!lostAfter, "an ended hold is not lost afterwards")
  }

  @Test func aLostHoldEndsOnceAndNothingRenewsIt() {
    var hold = hold()
    let first = hold.end(.lost)
    let second = hold.end(.lost)
    #expect(first)
    #expect(!second)
    hold.renewed(sentAt: .seconds(14))
    #expect(!hold.confirms(at: .seconds(14)))
    let due = hold.renewalDue(at: .seconds(14))
    #expect(due == .stop)
    let failed = hold.renewalFailed(at: .seconds(14))
    #expect(!failed, "already ended: not ended again")
  }
}
