import Foundation
import Testing

@testable import AuthCoordinator

// A flight that asks the lease about its grant before serving (`confirmGrant`, rule 19) and is
// stopped from outside while it asks: a logout here, or a second announcement once its lease
// went back (a part of `AccountStateMachineLeaseTests`, in a file of its own for its size).
extension AccountStateMachineLeaseTests {
  enum StopWhileConfirming: CaseIterable, Sendable {
    /// A logout in this process.
    case logoutHere
    /// Another announcement, which finds the flight holding no grant.
    case announcementElsewhere
  }

  /// Found by reading the untested gaps of the last stop: a flight whose save failed while a
  /// sign-out check was pending asks the lease before serving, carrying its save retry. A
  /// logout here (or another announcement) that ended it then made its task's answer a stale
  /// outcome of a save retry, which the machine took for an inconsistency and trapped. The
  /// answer now still decides what memory keeps, the task is not cancelled, and its retry goes
  /// on from its first wait: it saves, or checks and undoes, its write.
  @Test(arguments: StopWhileConfirming.allCases, [true, false])
  func aFlightStoppedWhileItAsksAboutItsGrantLetsItsSaveRetryGoOn(
    _ stop: StopWhileConfirming, _ current: Bool
  ) {
    let grant = LeaseGrant(
      key: u1, owner: "here", fence: 7, generation: 3, expiresAt: date.addingTimeInterval(15))
    var (saver, id) = self.machine(in: .persisting)
    _ = saver.signOutAnnounced(flightHoldsGrant: true, grant: grant)
    let unsaved = model("t2")
    #expect(
      saver.advance(id, .saveFailed(unsaved), date: date, now: .zero)
        == .next(.init(kind: .confirmGrant(grant), deadline: nil)))
    let ending: Machine.Ending?
    switch stop {
    case .logoutHere: ending = saver.signOut()
    case .announcementElsewhere:
      guard case .stopped(let stopped) = saver.signOutAnnounced(flightHoldsGrant: false) else {
        Issue.record("a flight holding no grant stops at the announcement")
        return
      }
      ending = stopped
    }
    #expect(ending?.result == .cancelled(.signedOut))
    #expect(ending?.stopsWork == false, "its task goes on with the save retry")
    #expect(saver.flightID == nil)
    #expect(saver.cachedModel == nil, "a sign-out: memory forgets")
    // The task's answer arrives: before the fix, a trap.
    let next = saver.advance(id, .grantConfirmed(current: current), date: date, now: .zero)
    guard case .next(let step) = next, case .awaitSaveRetry = step.kind else {
      Issue.record("the save retry goes on from its first wait: \(next)")
      return
    }
    let retried = saver.advance(id, .backedOff, date: date, now: .seconds(1))
    switch stop {
    case .logoutHere:
      // The logout removed the store's models: the retry only checks its earlier write.
      #expect(retried == .next(.init(kind: .checkWrite(unsaved), deadline: nil)))
    case .announcementElsewhere:
      // Memory forgot it on an announcement: the lease decides before the write (0xf382c).
      #expect(
        retried
          == .next(
            .init(kind: .retrySave(unsaved, attempt: 1, confirmingGrant: true), deadline: nil)))
    }
  }

  /// Without a save retry, the answer to a flight stopped while it asked still decides what
  /// memory keeps: the model its save stored, read back since, is the signed-out session's
  /// when the grant predates the sign-out.
  @Test(arguments: [true, false])
  func aStaleAnswerStillDecidesWhetherMemoryKeepsTheFlightsModel(_ current: Bool) {
    let grant = LeaseGrant(
      key: u1, owner: "here", fence: 7, generation: 3, expiresAt: date.addingTimeInterval(15))
    var (saver, id) = self.machine(in: .persisting)
    _ = saver.signOutAnnounced(flightHoldsGrant: true, grant: grant)
    let saved = model("t2")
    #expect(
      saver.advance(id, .saved, date: date, now: .zero)
        == .next(.init(kind: .confirmGrant(grant), deadline: nil)))
    #expect(saver.signOut(elsewhere: true)?.result == .cancelled(.signedOut))
    // A request reads the flight's model back from the store before the answer.
    _ = saver.request(.ifNeeded, date: date, now: .zero, newFlightID: 5)
    _ = saver.advance(5, .loaded(saved), date: date, now: .zero)
    #expect(saver.cachedModel == saved)
    #expect(
      saver.advance(id, .grantConfirmed(current: current), date: date, now: .zero) == .ignore)
    #expect(saver.cachedModel == (current ? saved : nil))
  }
}
